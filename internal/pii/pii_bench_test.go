package pii

import (
	"bytes"
	"testing"
)

// The sealer runs on every hot path: a create seals a national id, a last
// name and a consent token and hashes the national id; a retrieve opens
// three values, and a list page two per flow. These benchmarks keep its cost
// in view (`go test -bench . ./internal/pii`); speed is never asserted.

func benchSealer(b *testing.B) *Sealer {
	b.Helper()
	s, err := New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkSeal(b *testing.B) {
	s := benchSealer(b)
	b.ReportAllocs()
	for b.Loop() {
		s.Seal("01017012345", "flow:0192f6d0-7b8e-7c4a-9d2e-3f1a2b3c4d5e:nationalId")
	}
}

func BenchmarkOpen(b *testing.B) {
	s := benchSealer(b)
	ctx := "flow:0192f6d0-7b8e-7c4a-9d2e-3f1a2b3c4d5e:nationalId"
	sealed := s.Seal("01017012345", ctx)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Open(s.KeyID(), sealed, ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHash(b *testing.B) {
	s := benchSealer(b)
	b.ReportAllocs()
	for b.Loop() {
		s.Hash("nationalId", "01017012345")
	}
}
