package pii

import (
	"bytes"
	"testing"
)

func TestHashMatchesUnderEveryConfiguredKey(t *testing.T) {
	t.Parallel()
	k1, k2, k3 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	old, _ := New(k1)
	rotated, _ := New(k2, k1)
	stranger, _ := New(k3)
	sum := old.Hash("idempotency", "request")
	if bytes.Equal(rotated.Hash("idempotency", "request"), sum) {
		t.Fatal("a new key hashes as the old one did")
	}
	for _, c := range []struct {
		name  string
		s     *Sealer
		value string
		want  bool
	}{
		{"the key that made it", old, "request", true},
		{"a rotated sealer holding it as previous", rotated, "request", true},
		{"another value", rotated, "request2", false},
		{"a sealer without that key", stranger, "request", false},
	} {
		if got := c.s.HashMatches("idempotency", c.value, sum); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if rotated.HashMatches("other-domain", "request", sum) {
		t.Error("a hash matched in another domain")
	}
}
