package webhooks

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// blockedError is the refusal of the SSRF guard; its message names the address
// and why, never the URL.
type blockedError struct {
	addr   netip.Addr
	reason string
}

func (e *blockedError) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s address (FLOWD_WEBHOOK_ALLOW_PRIVATE is false)", e.addr, e.reason)
}

// Special-purpose IPv4 ranges that netip's predicates do not cover but that
// no organization's public webhook endpoint lives in.
var blockedPrefixes = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// nat64 is the well-known NAT64 prefix: its addresses reach the IPv4 address
// in their last 32 bits, which must be allowed too.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// blockedReason says why the SSRF guard refuses ip, or "" when it may be dialled.
func blockedReason(ip netip.Addr) string {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if ip.Is6() && nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	if ip.Is4() {
		if ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return "broadcast"
		}
		for _, p := range blockedPrefixes {
			if p.prefix.Contains(ip) {
				return p.reason
			}
		}
	}
	return ""
}

// guardControl is a net.Dialer Control function: it runs after DNS resolution,
// for the very address about to be connected to, so that neither a DNS name
// resolving to a private address nor a DNS rebinding slips past it.
func guardControl(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("refused to connect to %q: not an IP address", host)
	}
	if reason := blockedReason(ip); reason != "" {
		return &blockedError{addr: ip.Unmap(), reason: reason}
	}
	return nil
}
