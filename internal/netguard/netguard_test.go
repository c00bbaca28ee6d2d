package netguard

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestControl: the dialer's guard refuses every address that is not on
// the public internet, however it is spelled (IPv4-mapped, IPv4-compatible,
// 6to4, NAT64, deprecated site-local), and lets public addresses through on
// any port.
func TestControl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		address string
		refused bool
	}{
		{"IPv4 loopback", "127.0.0.1:80", true},
		{"IPv4 loopback, not .1", "127.3.2.1:443", true},
		{"IPv6 loopback", "[::1]:443", true},
		{"IPv4-mapped loopback", "[::ffff:127.0.0.1]:443", true},
		{"IPv4-mapped private", "[::ffff:192.168.1.1]:443", true},
		{"IPv4-compatible loopback", "[::127.0.0.1]:443", true},
		{"6to4 of loopback", "[2002:7f00:1::1]:443", true},
		{"6to4 of link-local", "[2002:a9fe:a9fe::1]:443", true},
		{"6to4 of private", "[2002:a00:1::1]:443", true},
		{"local-use NAT64 of private", "[64:ff9b:1::a00:1]:443", true},
		{"local-use NAT64 of loopback", "[64:ff9b:1::7f00:1]:443", true},
		{"well-known NAT64 of loopback", "[64:ff9b::7f00:1]:443", true},
		{"well-known NAT64 of cloud metadata", "[64:ff9b::a9fe:a9fe]:443", true},
		{"deprecated site-local", "[fec0::1]:443", true},
		{"discard-only", "[100::1]:443", true},
		{"Teredo", "[2001::1]:443", true},
		{"IPv6 documentation", "[2001:db8::1]:443", true},
		{"IPv4 unspecified", "0.0.0.0:443", true},
		{"IPv6 unspecified", "[::]:443", true},
		{"this network", "0.1.2.3:443", true},
		{"private 10/8", "10.1.2.3:443", true},
		{"private 172.16/12", "172.16.0.1:443", true},
		{"private 192.168/16", "192.168.1.1:443", true},
		{"cloud metadata", "169.254.169.254:80", true},
		{"IPv6 link-local", "[fe80::1]:443", true},
		{"IPv6 link-local with zone", "[fe80::1%eth0]:443", true},
		{"shared address space (CGNAT)", "100.64.0.1:443", true},
		{"unique local fc00::/7, low", "[fc00::1]:443", true},
		{"unique local fc00::/7, high", "[fdff:ffff::1]:443", true},
		{"IPv4 multicast", "224.0.0.1:443", true},
		{"IPv4 multicast, SSDP", "239.255.255.250:443", true},
		{"IPv6 multicast, link scope", "[ff02::1]:443", true},
		{"IPv6 multicast, global scope", "[ff0e::1]:443", true},
		{"IETF protocol assignments", "192.0.0.8:443", true},
		{"IPv4 documentation", "192.0.2.1:443", true},
		{"benchmarking", "198.18.0.1:443", true},
		{"reserved", "240.0.0.1:443", true},
		{"broadcast", "255.255.255.255:443", true},
		{"not an IP address", "example.com:443", true},
		{"public IPv4", "8.8.8.8:443", false},
		{"public IPv4 on another port", "1.1.1.1:8443", false},
		{"public IPv4 on http", "93.184.215.14:80", false},
		{"public IPv6", "[2001:4860:4860::8888]:443", false},
		{"public IPv6 on another port", "[2606:4700:4700::1111]:8443", false},
		{"well-known NAT64 of a public address", "[64:ff9b::808:808]:443", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			network := "tcp6"
			if ap, err := netip.ParseAddrPort(tt.address); err == nil && ap.Addr().Is4() {
				network = "tcp4"
			}
			err := control(network, tt.address, nil)
			if !tt.refused {
				if err != nil {
					t.Errorf("control(%s, %s) = %v, want allowed", network, tt.address, err)
				}
				return
			}
			var blocked *BlockedError
			if !errors.As(err, &blocked) || !strings.Contains(err.Error(), "refused to connect") {
				t.Errorf("control(%s, %s) = %v, want refused", network, tt.address, err)
			}
		})
	}
}
