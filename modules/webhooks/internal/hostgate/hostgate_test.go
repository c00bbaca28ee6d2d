package hostgate

import (
	"context"
	"testing"
	"time"
)

// TestGate walks the gate through saturation, timeouts and recovery on a
// clock of its own: limit 2 per host, a first backoff of 1 s, no waiting for
// a slot (TestGateWaitsForYoungDeliveries). Each step enters (and says
// whether it should pass, or how long the hold may be) or lets the host's
// oldest delivery leave with a Verdict.
func TestGate(t *testing.T) {
	t.Parallel()
	const s = time.Second
	type step struct {
		after time.Duration // the clock moves on by this first
		host  string
		leave *Verdict // nil: enter
		pass  bool
		// A held delivery waits at least min and less than max, held for a
		// slow host or only a busy one.
		min, max time.Duration
		slow     bool
	}
	enter := func(after time.Duration, host string) step { return step{after: after, host: host, pass: true} }
	busy := func(after time.Duration, host string, min, max time.Duration) step {
		return step{after: after, host: host, min: min, max: max}
	}
	slow := func(after time.Duration, host string, min, max time.Duration) step {
		return step{after: after, host: host, min: min, max: max, slow: true}
	}
	leave := func(after time.Duration, host string, v Verdict) step {
		return step{after: after, host: host, leave: &v}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a host takes its limit, then holds the rest; another host is not affected", []step{
			enter(0, "a"), enter(0, "a"), busy(0, "a", s, 2*s), busy(0, "a", s, 2*s),
			enter(0, "b"), enter(0, "b"),
			leave(0, "a", Answered), enter(0, "a"),
		}},
		{"held behind young deliveries, a delivery waits the first backoff; behind slow ones, the backoff doubles once per backoff", []step{
			enter(0, "a"), enter(0, "a"),
			busy(0, "a", s, 2*s), busy(500*time.Millisecond, "a", s, 2*s),
			slow(500*time.Millisecond, "a", s, 2*s), slow(s, "a", 2*s, 4*s), slow(s, "a", 2*s, 4*s),
			slow(s, "a", 4*s, 8*s),
		}},
		{"a quiet backoff starts it again", []step{
			enter(0, "a"), enter(0, "a"),
			slow(s, "a", s, 2*s), slow(s, "a", 2*s, 4*s), slow(2*s, "a", 4*s, 8*s),
			slow(5*s, "a", s, 2*s),
		}},
		{"a timeout opens the circuit; after the backoff one probe goes, and its answer closes it", []step{
			enter(0, "a"), leave(10*s, "a", TimedOut),
			slow(0, "a", 2*s, 3*s), slow(500*time.Millisecond, "a", 1500*time.Millisecond, 2500*time.Millisecond),
			enter(0, "b"),
			enter(600*time.Millisecond, "a"), slow(0, "a", 2*s, 4*s),
			leave(100*time.Millisecond, "a", Answered), enter(0, "a"), enter(0, "a"),
		}},
		{"a probe that times out opens it for longer", []step{
			enter(0, "a"), leave(10*s, "a", TimedOut),
			enter(1100*time.Millisecond, "a"), leave(10*s, "a", TimedOut),
			slow(0, "a", 4*s, 6*s),
		}},
		{"a probe Interrupted by flowd lets the next one go", []step{
			enter(0, "a"), leave(10*s, "a", TimedOut),
			enter(1100*time.Millisecond, "a"), leave(0, "a", Interrupted),
			enter(0, "a"),
		}},
		{"a failure quicker than the timeout closes the circuit", []step{
			enter(0, "a"), leave(10*s, "a", TimedOut),
			enter(1100*time.Millisecond, "a"), leave(10*time.Millisecond, "a", Answered),
			enter(0, "a"), enter(0, "a"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := time.Unix(1_000_000, 0)
			g := New(2, time.Second)
			g.now, g.queue = func() time.Time { return now }, 0
			inFlight := map[string][]Ticket{}
			for i, st := range tt.steps {
				now = now.Add(st.after)
				if st.leave != nil {
					g.Leave(inFlight[st.host][0], *st.leave)
					inFlight[st.host] = inFlight[st.host][1:]
					continue
				}
				a := g.Enter(context.Background(), st.host)
				switch {
				case a.OK != st.pass:
					t.Fatalf("step %d: enter %s passed %v, want %v", i, st.host, a.OK, st.pass)
				case a.OK:
					inFlight[st.host] = append(inFlight[st.host], a.Ticket)
				case a.Hold < st.min || a.Hold >= st.max || a.Slow != st.slow:
					t.Fatalf("step %d: %s held for %v (slow %v), want [%v, %v) (slow %v)", i, st.host, a.Hold, a.Slow, st.min, st.max, st.slow)
				}
			}
		})
	}
}

// TestGateWaitsForYoungDeliveries: a delivery to a host full of young
// deliveries (one that answers quickly but is busy) waits for one to leave
// rather than being held at once; held only when none leaves in time, and
// neither let through nor held when its context ends.
func TestGateWaitsForYoungDeliveries(t *testing.T) {
	t.Parallel()
	g := New(1, time.Second)
	g.queue = time.Hour // only a leave or the context ends the wait
	first := g.Enter(context.Background(), "a")
	if !first.OK {
		t.Fatal("the first delivery was held")
	}
	second := make(chan Admission)
	go func() { second <- g.Enter(context.Background(), "a") }()
	for waiting := false; !waiting; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		waiting = len(g.hosts["a"].waiting) > 0
		g.mu.Unlock()
	}
	g.Leave(first.Ticket, Answered)
	got := <-second
	if !got.OK {
		t.Fatal("the waiting delivery was held when the first left")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if a := g.Enter(ctx, "a"); a.OK || a.Hold != 0 {
		t.Fatalf("with its context ended a delivery passed %v, held %v", a.OK, a.Hold)
	}
	g.queue = time.Millisecond
	if a := g.Enter(context.Background(), "a"); a.OK || a.Slow || a.Hold < time.Second || a.Hold >= 2*time.Second {
		t.Fatalf("after waiting in vain a delivery passed %v, held %v (slow %v); want held for [1s, 2s), busy", a.OK, a.Hold, a.Slow)
	}
	g.Leave(got.Ticket, Answered)
}

// TestGateBackoffStopsAtItsCeiling: however long a host stays saturated, a
// held delivery waits less than twice the ceiling.
func TestGateBackoffStopsAtItsCeiling(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	g := New(1, time.Second)
	g.now, g.queue = func() time.Time { return now }, 0
	if a := g.Enter(context.Background(), "a"); !a.OK {
		t.Fatal("the first delivery was held")
	}
	var wait time.Duration
	for range 100 {
		wait = g.Enter(context.Background(), "a").Hold
		now = now.Add(wait / 2)
	}
	if ceiling := holdCeiling * time.Second; wait < ceiling || wait >= 2*ceiling {
		t.Fatalf("after 100 holds a delivery waits %v, want [%v, %v)", wait, ceiling, 2*ceiling)
	}
}

// TestGateForgetsHealthyHosts: a host with nothing in flight and nothing
// against it takes no memory.
func TestGateForgetsHealthyHosts(t *testing.T) {
	t.Parallel()
	g := New(2, time.Second)
	for _, h := range []string{"a", "b", "c"} {
		a := g.Enter(context.Background(), h)
		if !a.OK {
			t.Fatalf("%s was held", h)
		}
		g.Leave(a.Ticket, Answered)
	}
	if len(g.hosts) != 0 {
		t.Fatalf("the gate remembers %d hosts", len(g.hosts))
	}
}
