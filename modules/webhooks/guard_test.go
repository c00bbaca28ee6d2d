package webhooks

import (
	"net/netip"
	"testing"
)

func TestBlockedReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want string // "" when allowed
	}{
		{"127.0.0.1", "loopback"},
		{"127.3.2.1", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"192.168.1.1", "private"},
		{"::ffff:192.168.1.1", "private"},
		{"fd00::1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"ff05::1", "multicast"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"100.64.0.1", "shared (carrier-grade NAT)"},
		{"255.255.255.255", "broadcast"},
		{"64:ff9b::7f00:1", "loopback"},
		{"8.8.8.8", ""},
		{"2001:4860:4860::8888", ""},
		{"::ffff:8.8.8.8", ""},
		{"93.184.215.14", ""},
	}
	for _, tt := range tests {
		if got := blockedReason(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("blockedReason(%s) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

func TestGuardControl(t *testing.T) {
	t.Parallel()
	if err := guardControl("tcp4", "127.0.0.1:80", nil); err == nil {
		t.Error("loopback allowed")
	}
	if err := guardControl("tcp6", "[fe80::1%eth0]:443", nil); err == nil {
		t.Error("link-local with zone allowed")
	}
	if err := guardControl("tcp4", "8.8.8.8:443", nil); err != nil {
		t.Errorf("public address refused: %v", err)
	}
}
