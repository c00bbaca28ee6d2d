package pii

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestSealOpensOnlyInItsContext(t *testing.T) {
	t.Parallel()
	s, err := New(testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal("01017012345", "flow:a:nationalId")
	if bytes.Contains(sealed, []byte("01017012345")) {
		t.Fatal("the plaintext shows in the ciphertext")
	}
	got, err := s.Open(s.KeyID(), sealed, "flow:a:nationalId")
	if err != nil || got != "01017012345" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := s.Open(s.KeyID(), sealed, "flow:b:nationalId"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("another row's context opened the value: %v", err)
	}
	if _, err := s.Open(s.KeyID(), sealed[:10], "flow:a:nationalId"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a truncated value: %v", err)
	}
	if _, err := s.Open("nope", sealed, "flow:a:nationalId"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("an unknown key id: %v", err)
	}
	if bytes.Equal(sealed, s.Seal("01017012345", "flow:a:nationalId")) {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
}

// TestAContextInPartsIsTheirConcatenation: a value sealed with its context
// in parts opens with the whole, and the other way round; parts that join
// to another context do not open it.
func TestAContextInPartsIsTheirConcatenation(t *testing.T) {
	t.Parallel()
	s, err := New(testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	inParts := s.Seal("01017012345", "flow:", "a", ":", "nationalId")
	if got, err := s.Open(s.KeyID(), inParts, "flow:a:nationalId"); err != nil || got != "01017012345" {
		t.Fatalf("sealed in parts, opened whole: %q, %v", got, err)
	}
	whole := s.Seal("01017012345", "flow:a:nationalId")
	if got, err := s.Open(s.KeyID(), whole, "flow:", "a", ":", "nationalId"); err != nil || got != "01017012345" {
		t.Fatalf("sealed whole, opened in parts: %q, %v", got, err)
	}
	if _, err := s.Open(s.KeyID(), whole, "flow:", "b", ":", "nationalId"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("parts of another context opened the value: %v", err)
	}
}

func TestRotationOpensOldValuesAndSealsWithTheNewKey(t *testing.T) {
	t.Parallel()
	old, _ := New(testKey(1))
	sealed := old.Seal("x", "c")
	rotated, err := New(testKey(2), testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	if rotated.KeyID() == old.KeyID() {
		t.Fatal("two keys share an id")
	}
	if got, err := rotated.Open(old.KeyID(), sealed, "c"); err != nil || got != "x" {
		t.Fatalf("opening an old value: %q %v", got, err)
	}
	if bytes.Equal(old.Hash("d", "v"), rotated.Hash("d", "v")) {
		t.Fatal("hashes do not depend on the key")
	}
	if !bytes.Equal(old.Hash("d", "v"), old.Hash("d", "v")) || bytes.Equal(old.Hash("d", "v"), old.Hash("e", "v")) {
		t.Fatal("hashes must be deterministic per domain")
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("a short key was accepted")
	}
}

// Open reuses buffers across calls: values and contexts of every size, opened
// at once from many goroutines, each come back whole and only in their own
// context.
func TestOpenReusesNoBytesBetweenCalls(t *testing.T) {
	t.Parallel()
	s, err := New(testKey(3))
	if err != nil {
		t.Fatal(err)
	}
	type value struct {
		plain, context string
		sealed         []byte
	}
	var values []value
	for _, n := range []int{0, 1, 11, 255, 256, 300, 5000} {
		for _, c := range []int{1, 40, 256, 1000} {
			plain := strings.Repeat(string(rune('a'+n%26)), n)
			context := strings.Repeat("c", c) + strconv.Itoa(n)
			values = append(values, value{plain, context, s.Seal(plain, context)})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				v := values[(g+i)%len(values)]
				got, err := s.Open(s.KeyID(), v.sealed, v.context)
				if err != nil || got != v.plain {
					errs <- fmt.Errorf("Open of %d bytes in a context of %d = %d bytes, %v", len(v.plain), len(v.context), len(got), err)
					return
				}
				if _, err := s.Open(s.KeyID(), v.sealed, v.context+"x"); !errors.Is(err, ErrCorrupt) {
					errs <- fmt.Errorf("opened in another context: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
