// Package costlimit names what the token service's limit on costly client
// authentications counts by. The limit (a windowlimit.Limiter) bounds the
// client authentications that cost flowd real work: argon2id of a secret
// without a current MAC, and a fetch of a client's jwks_uri. Each such
// attempt takes one of limit slots for the window and gives it back when it
// succeeds, so a client that fails limit times in a window from an address
// is refused the costly path there until the oldest failure leaves it; the
// hashing semaphore bounds the work of all keys together. Nothing else is
// counted: a secret with a MAC and an assertion whose keys are at hand are
// checked for little, and failures in the name of one client never count
// against another, even from the same address (every caller behind a load
// balancer that is not trusted to name them). The counts are per instance:
// they guard this instance's CPU, and a guesser spread over instances still
// meets a 256-bit secret.
package costlimit

import "net/netip"

// Key is what the limit counts by: the client as named, and its source
// address as AddressKey gives it.
func Key(clientID, addr string) string { return clientID + "\x00" + AddressKey(addr) }

// AddressKey is the source address as the limit counts it: an IPv4
// address, or the /64 of an IPv6 address, since one subscriber commonly
// holds a whole /64.
func AddressKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
