package dpopproof

import "testing"

func TestSameHTU(t *testing.T) {
	t.Parallel()
	tests := []struct {
		htu, want string
		same      bool
	}{
		{"https://flowd.test/oauth/token", "https://flowd.test/oauth/token", true},
		{"HTTPS://Flowd.Test:443/oauth/token?x=1#f", "https://flowd.test/oauth/token", true},
		{"http://flowd.test:80/a", "http://flowd.test/a", true},
		{"https://flowd.test:8443/a", "https://flowd.test/a", false},
		{"https://flowd.test/a/", "https://flowd.test/a", false},
		{"https://flowd.test/A", "https://flowd.test/a", false},
		{"https://user@flowd.test/a", "https://flowd.test/a", false},
		{"ftp://flowd.test/a", "ftp://flowd.test/a", false},
		{"https://[::1]:443/a", "https://[::1]/a", true},
		{"", "https://flowd.test/a", false},
	}
	for _, tt := range tests {
		if got := sameHTU(tt.htu, tt.want); got != tt.same {
			t.Errorf("sameHTU(%q, %q) = %v", tt.htu, tt.want, got)
		}
	}
}
