package keys

import (
	"bytes"
	"strings"
	"testing"
)

func TestSealAndOpen(t *testing.T) {
	t.Parallel()
	kek := bytes.Repeat([]byte{1}, 32)
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := k.Seal(kek)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Open(k.ID, sealed, kek)
	if err != nil || !back.Private.Equal(k.Private) {
		t.Fatalf("open: %v", err)
	}
	if _, err := Open(k.ID, sealed, bytes.Repeat([]byte{2}, 32)); err == nil || !strings.Contains(err.Error(), "FLOWD_KEY_ENCRYPTION_KEY") {
		t.Fatalf("another key-encryption key opened it: %v", err)
	}
	if _, err := Open("other-kid", sealed, kek); err == nil {
		t.Fatal("a sealed key passed off under another key id opened")
	}
	pub, err := k.PublicJWK()
	if err != nil || bytes.Contains(pub, []byte(`"d"`)) {
		t.Fatalf("public JWK %s %v", pub, err)
	}
	if _, err := ParsePublic(pub); err != nil {
		t.Fatal(err)
	}
}
