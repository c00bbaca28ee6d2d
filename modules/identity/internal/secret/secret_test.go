package secret

import (
	"regexp"
	"testing"
)

func TestIDsAndSecretsAreRandomAndReadable(t *testing.T) {
	t.Parallel()
	id, other := ID("fc_", 10), ID("fc_", 10)
	if !regexp.MustCompile(`^fc_[a-z2-7]{16}$`).MatchString(id) || id == other {
		t.Fatalf("ids %q %q", id, other)
	}
	s := Random("fcs_", 32)
	if !regexp.MustCompile(`^fcs_[A-Za-z0-9_-]{43}$`).MatchString(s) || s == Random("fcs_", 32) {
		t.Fatalf("secret %q", s)
	}
}
