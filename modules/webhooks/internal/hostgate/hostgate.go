// Package hostgate keeps a slow webhook receiver from taking an instance's
// delivery workers: a per-host limit of deliveries in flight, a backoff for
// those held back, and a circuit that opens on timeouts.
package hostgate

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// holdCeiling bounds the backoff, in multiples of its first wait: five
// minutes by default, so that a host back from a long hang gets its held
// deliveries within ten.
const holdCeiling = 300

// Gate keeps a slow host from taking an instance's delivery workers. At most
// limit deliveries to one host are in flight at once. A delivery beyond them
// waits a moment for one to finish while they are young (a busy host that
// answers quickly), and is otherwise held back: its job is snoozed for the
// host's backoff. A host that does not answer within the timeout opens its
// circuit: nothing more goes to it until its backoff has passed, then one
// delivery at a time probes it, and the first answer closes the circuit.
//
// The backoff doubles, at most once per backoff, while the host stays
// saturated with deliveries older than its first wait or keeps timing out,
// and falls back to its first wait after a quiet backoff. Held deliveries
// wake spread over a backoff, so that a held backlog costs about its size
// over the backoff in fetches a second, not a herd at each turn.
type Gate struct {
	limit int
	base  time.Duration // the first backoff
	// queue is how long a delivery waits for a slot among young deliveries
	// before it is held; slow is the age from which a delivery in flight
	// counts as slow.
	queue, slow time.Duration
	ceiling     time.Duration
	now         func() time.Time

	mu    sync.Mutex
	hosts map[string]*hostState
}

// hostState is what the gate knows of one host; hosts with nothing in flight
// and nothing against them are forgotten.
type hostState struct {
	started []time.Time // of the deliveries in flight, oldest first
	// waiting are the deliveries waiting for a slot, first come first: a
	// delivery that leaves wakes one.
	waiting []chan struct{}
	// strikes counts the backoffs in a row in which the host was saturated
	// with slow deliveries or timed out; the backoff is base << (strikes-1).
	strikes    int
	nextStrike time.Time // a strike before this does not count again
	lastBad    time.Time // the last saturation or timeout
	// openUntil is when the open circuit lets a probe through; zero while closed.
	openUntil time.Time
	probing   bool
}

// Ticket is a delivery let through; it leaves with it.
type Ticket struct {
	host    string
	started time.Time
}

// Admission is the gate's answer to a delivery.
type Admission struct {
	OK     bool
	Ticket Ticket        // when OK: to leave with
	Hold   time.Duration // when not: how long to hold it back; 0 when its context ended
	// Slow says it is held because its host is slow or its circuit open,
	// not only busy: such holds can pile up.
	Slow bool
}

// Verdict is what a delivery learned of its host.
type Verdict int

const (
	Answered    Verdict = iota // an answer, or a failure quicker than the timeout
	TimedOut                   // no answer within the timeout
	Interrupted                // cancelled by flowd (shutdown, the flow deleted): nothing learned
)

// New returns a gate that lets limit deliveries to one host go at once and
// holds others back for base at first.
func New(limit int, base time.Duration) *Gate {
	return &Gate{limit: limit, base: base, queue: base / 10, slow: base, ceiling: holdCeiling * base,
		now: time.Now, hosts: map[string]*hostState{}}
}

// Enter lets a delivery to host go, or says how long to hold it back. A
// delivery that entered must leave. When ctx ends while it waits, it is
// neither let through nor held.
func (g *Gate) Enter(ctx context.Context, host string) Admission {
	var expired <-chan time.Time
	waited := false
	for {
		g.mu.Lock()
		now := g.now()
		s := g.hosts[host]
		if s == nil {
			s = &hostState{}
			g.hosts[host] = s
		}
		open := !s.openUntil.IsZero()
		var a Admission
		switch {
		case open && (now.Before(s.openUntil) || s.probing):
			g.strike(s, now)
			a = Admission{Hold: g.backoff(s) + max(0, s.openUntil.Sub(now)), Slow: true}
		case len(s.started) < g.limit:
			s.probing = open
			s.started = append(s.started, now)
			g.mu.Unlock()
			return Admission{OK: true, Ticket: Ticket{host: host, started: now}}
		case now.Sub(s.started[0]) >= g.slow:
			g.strike(s, now)
			a = Admission{Hold: g.backoff(s), Slow: true}
		case waited || g.queue == 0:
			a = Admission{Hold: g.backoff(s)}
		}
		if a.Hold > 0 {
			a.Hold += rand.N(g.backoff(s))
			g.mu.Unlock()
			return a
		}
		// Young deliveries fill the host: wait a moment for one to leave.
		if expired == nil {
			expired = time.After(g.queue)
		}
		woken := make(chan struct{})
		s.waiting = append(s.waiting, woken)
		g.mu.Unlock()
		select {
		case <-woken:
			continue
		case <-expired:
			waited = true
		case <-ctx.Done():
		}
		g.mu.Lock()
		if i := slices.Index(s.waiting, woken); i >= 0 {
			s.waiting = slices.Delete(s.waiting, i, i+1)
		} else {
			s.wake() // it was woken as it gave up: the slot goes to the next
		}
		g.mu.Unlock()
		if ctx.Err() != nil {
			return Admission{}
		}
	}
}

// wake lets the first waiting delivery try again.
func (s *hostState) wake() {
	if len(s.waiting) > 0 {
		close(s.waiting[0])
		s.waiting = s.waiting[1:]
	}
}

// Leave ends a delivery that entered, with what it learned of its host.
func (g *Gate) Leave(t Ticket, v Verdict) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	s := g.hosts[t.host]
	if i := slices.Index(s.started, t.started); i >= 0 {
		s.started = slices.Delete(s.started, i, i+1)
	}
	s.wake()
	switch v {
	case Answered:
		s.openUntil, s.probing = time.Time{}, false
	case TimedOut:
		g.strike(s, now)
		s.openUntil, s.probing = now.Add(g.backoff(s)), false
	case Interrupted:
		s.probing = false
	}
	if len(s.started) == 0 && len(s.waiting) == 0 && s.openUntil.IsZero() && now.Sub(s.lastBad) > g.backoff(s) {
		delete(g.hosts, t.host)
	}
}

// strike notes that the host is slow or timed out: the backoff doubles once
// per backoff while this goes on, and starts again after a quiet one with
// the circuit closed (a probe's wait for its timeout is not quiet).
func (g *Gate) strike(s *hostState, now time.Time) {
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
func (g *Gate) backoff(s *hostState) time.Duration {
	d := g.base
	for i := 1; i < s.strikes && d < g.ceiling; i++ {
		d *= 2
	}
	return min(d, g.ceiling)
}
