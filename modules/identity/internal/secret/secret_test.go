package secret

import (
	"strings"
	"testing"
)

func TestHashAndVerify(t *testing.T) {
	t.Parallel()
	p := Params{Memory: 64, Time: 1, Threads: 1}
	h := Hash("fcs_right", p)
	if !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") || strings.Contains(h, "fcs_right") {
		t.Fatalf("hash %q", h)
	}
	if h == Hash("fcs_right", p) {
		t.Fatal("two hashes of one secret are equal: no salt")
	}
	tests := []struct {
		secret, hash string
		ok, err      bool
	}{
		{"fcs_right", h, true, false},
		{"fcs_wrong", h, false, false},
		{"", h, false, false},
		{"fcs_right", "$argon2i$v=19$m=64,t=1,p=1$c2FsdA$aGFzaA", false, true},
		{"fcs_right", "$argon2id$v=19$m=64,t=0,p=1$c2FsdA$aGFzaA", false, true},
		{"fcs_right", "$argon2id$v=19$m=99999999,t=1,p=1$c2FsdA$aGFzaA", false, true},
		{"fcs_right", "plain", false, true},
	}
	for _, tt := range tests {
		ok, err := Verify(tt.secret, tt.hash)
		if ok != tt.ok || (err != nil) != tt.err {
			t.Errorf("Verify(%q, %q) = %v, %v", tt.secret, tt.hash, ok, err)
		}
	}
	if DefaultParams.Memory < 19*1024 || DefaultParams.Time < 2 {
		t.Fatalf("production parameters below OWASP's recommendation: %+v", DefaultParams)
	}
}
