package webhooks

import (
	"math/rand/v2"
	"sync"
	"time"
)

// DefaultHostConcurrency is how many deliveries one instance sends to one
// host at once: enough for a receiver that answers in 100 ms to take 100
// deliveries a second from each instance, few enough that a receiver that
// hangs holds a tenth of the workers.
const DefaultHostConcurrency = 10

// DefaultHoldBackoff is the first wait of a delivery held back by its host.
const DefaultHoldBackoff = time.Second

// holdCeiling bounds the backoff, in multiples of its first wait: five
// minutes by default, so that a host back from a long hang gets its held
// deliveries within ten.
const holdCeiling = 300

// gate keeps a slow host from taking an instance's delivery workers: at most
// limit deliveries to one host are in flight at once, and the others are held
// back (their jobs snoozed). A host that does not answer within the timeout
// opens its circuit: nothing more goes to it until its backoff has passed,
// then one delivery at a time probes it, and the first answer closes the
// circuit. The backoff doubles, at most once per backoff, while the host
// stays saturated or keeps timing out, and falls back to its first wait once
// a whole backoff passes without either; held deliveries wake spread over a
// backoff, so that a held backlog costs about its size over the backoff in
// fetches a second, not a herd at each turn.
type gate struct {
	limit   int
	base    time.Duration
	ceiling time.Duration
	now     func() time.Time

	mu    sync.Mutex
	hosts map[string]*hostState
}

// hostState is what the gate knows of one host; hosts with nothing in flight
// and nothing against them are forgotten.
type hostState struct {
	inFlight int
	// strikes counts the backoffs in a row in which the host was saturated
	// or timed out; the backoff is base << (strikes-1).
	strikes    int
	nextStrike time.Time // a strike before this does not count again
	lastBad    time.Time // the last saturation or timeout
	// openUntil is when the open circuit lets a probe through; zero while closed.
	openUntil time.Time
	probing   bool
}

// verdict is what a delivery learned of its host.
type verdict int

const (
	answered    verdict = iota // an answer, or a failure quicker than the timeout
	timedOut                   // no answer within the timeout
	interrupted                // cancelled by flowd (shutdown, the flow deleted): nothing learned
)

func newGate(limit int, base time.Duration) *gate {
	return &gate{limit: limit, base: base, ceiling: holdCeiling * base, now: time.Now, hosts: map[string]*hostState{}}
}

// enter lets a delivery to host go, or says how long to hold it back. A
// delivery that entered must leave.
func (g *gate) enter(host string) (bool, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	s := g.hosts[host]
	if s == nil {
		s = &hostState{}
		g.hosts[host] = s
	}
	open := !s.openUntil.IsZero()
	if open && (now.Before(s.openUntil) || s.probing) || s.inFlight >= g.limit {
		g.strike(s, now)
		wait := g.backoff(s)
		if open && now.Before(s.openUntil) {
			wait += s.openUntil.Sub(now)
		}
		return false, wait + rand.N(g.backoff(s))
	}
	s.probing = open
	s.inFlight++
	return true, 0
}

// leave ends a delivery that entered, with what it learned of its host.
func (g *gate) leave(host string, v verdict) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	s := g.hosts[host]
	s.inFlight--
	switch v {
	case answered:
		s.openUntil, s.probing = time.Time{}, false
	case timedOut:
		g.strike(s, now)
		s.openUntil, s.probing = now.Add(g.backoff(s)), false
	case interrupted:
		s.probing = false
	}
	if s.inFlight == 0 && s.openUntil.IsZero() && now.Sub(s.lastBad) > g.backoff(s) {
		delete(g.hosts, host)
	}
}

// strike notes that the host is saturated or timed out: the backoff doubles
// once per backoff while this goes on, and starts again after a quiet one
// with the circuit closed (a probe's wait for its timeout is not quiet).
func (g *gate) strike(s *hostState, now time.Time) {
	if s.strikes > 0 && s.openUntil.IsZero() && now.Sub(s.lastBad) > g.backoff(s) {
		s.strikes = 0
	}
	s.lastBad = now
	if s.strikes == 0 || !now.Before(s.nextStrike) {
		s.strikes++
		s.nextStrike = now.Add(g.backoff(s))
	}
}

// backoff is the host's current wait: base doubled per strike after the
// first, at most the ceiling.
func (g *gate) backoff(s *hostState) time.Duration {
	d := g.base
	for i := 1; i < s.strikes && d < g.ceiling; i++ {
		d *= 2
	}
	return min(d, g.ceiling)
}
