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
