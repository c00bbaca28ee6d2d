// Package costlimit bounds, per client and source address, the work that
// failed client authentications may cost the token service.
package costlimit

import (
	"net/netip"
	"sync"
	"time"
)

// Limiter bounds, per key (a client and a source address together, Key),
// the client authentications that cost flowd real work: argon2id of a
// secret without a current MAC, and a fetch of a client's jwks_uri. Each
// such attempt takes one of limit slots for the window and gives it back
// when it succeeds, so a client that fails limit times in a window from an
// address is refused the costly path there until the oldest failure leaves
// it; the hashing semaphore bounds the work of all keys together. Nothing
// else is counted: a secret with a MAC and an assertion whose keys are at
// hand are checked for little, and failures in the name of one client
// never count against another, even from the same address (every caller
// behind a load balancer that is not trusted to name them). The counts are
// per instance: they guard this instance's CPU, and a guesser spread over
// instances still meets a 256-bit secret.
type Limiter struct {
	mu     sync.Mutex
	now    func() time.Time
	window time.Duration
	limit  int
	taken  map[string][]time.Time
	swept  time.Time
}

// New returns a limiter of limit slots per key within window.
func New(now func() time.Time, window time.Duration, limit int) *Limiter {
	return &Limiter{now: now, window: window, limit: limit, taken: map[string][]time.Time{}}
}

// Take takes a slot for key, or reports how long until one frees up.
func (l *Limiter) Take(key string) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	ts := l.recent(key, now)
	if len(ts) >= l.limit {
		wait = ts[len(ts)-l.limit].Add(l.window).Sub(now)
		return max(wait, time.Second), false
	}
	l.taken[key] = append(ts, now)
	if now.Sub(l.swept) > l.window {
		l.swept = now
		for k := range l.taken {
			l.recent(k, now)
		}
	}
	return 0, true
}

// GiveBack returns the latest slot of key, after the attempt that took it
// succeeded or never did the costly work.
func (l *Limiter) GiveBack(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ts := l.taken[key]; len(ts) > 0 {
		l.taken[key] = ts[:len(ts)-1]
	}
}

// recent drops key's slots older than the window and returns the rest.
func (l *Limiter) recent(key string, now time.Time) []time.Time {
	ts := l.taken[key]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= l.window {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(l.taken, key)
		return nil
	}
	l.taken[key] = ts
	return ts
}

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
