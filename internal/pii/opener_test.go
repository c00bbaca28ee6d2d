package pii

import (
	"bytes"
	"errors"
	"testing"
)

// TestAnOpenerOpensWhatItsKeySealedAndNothingElse: an Opener of a key opens
// what a Sealer of the same key sealed, in the same context only, and
// nothing another key sealed.
func TestAnOpenerOpensWhatItsKeySealedAndNothingElse(t *testing.T) {
	t.Parallel()
	raw := bytes.Repeat([]byte{7}, 32)
	s, err := New(raw)
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewOpener(raw)
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal("Nordmann", "flow:", "f1", ":lastName")
	if got, err := o.Open(sealed, "flow:f1", ":", "lastName"); err != nil || got != "Nordmann" {
		t.Errorf("Open = %q, %v", got, err)
	}
	if _, err := o.Open(sealed, "flow:f2:lastName"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("another context: %v, want ErrCorrupt", err)
	}
	other, _ := New(bytes.Repeat([]byte{8}, 32))
	if _, err := o.Open(other.Seal("Nordmann", "flow:f1:lastName"), "flow:f1:lastName"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("another key's value: %v, want ErrCorrupt", err)
	}
	if _, err := NewOpener(raw[:16]); err == nil {
		t.Error("a 16-byte key made an Opener")
	}
}

// TestOpenUnderAnyTriesEveryConfiguredKey: a value stored without its key's
// id opens under the current key or a previous one, and under no other.
func TestOpenUnderAnyTriesEveryConfiguredKey(t *testing.T) {
	t.Parallel()
	oldRaw, newRaw := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	old, _ := New(oldRaw)
	rotated, err := New(newRaw, oldRaw)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Sealer{old, rotated} {
		if got, err := rotated.OpenUnderAny(s.Seal("key", "subject-key:o:k:key"), "subject-key:o:k:key"); err != nil || got != "key" {
			t.Errorf("OpenUnderAny = %q, %v", got, err)
		}
	}
	other, _ := New(bytes.Repeat([]byte{3}, 32))
	if _, err := rotated.OpenUnderAny(other.Seal("key", "c"), "c"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a value of another key: %v, want ErrCorrupt", err)
	}
}
