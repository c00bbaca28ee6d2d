package webhooks

import (
	"testing"
	"time"
)

// TestGate walks the gate through saturation, timeouts and recovery on a
// clock of its own: limit 2 per host, a first backoff of 1 s. Each step
// enters (and says whether it should pass, or how long the hold may be) or
// leaves with a verdict.
func TestGate(t *testing.T) {
	t.Parallel()
	const s = time.Second
	type step struct {
		after time.Duration // the clock moves on by this first
		host  string
		leave *verdict // nil: enter
		pass  bool
		// A held delivery waits at least min and less than max.
		min, max time.Duration
	}
	enter := func(host string, pass bool) step { return step{host: host, pass: pass} }
	held := func(after time.Duration, host string, min, max time.Duration) step {
		return step{after: after, host: host, min: min, max: max}
	}
	leave := func(after time.Duration, host string, v verdict) step { return step{after: after, host: host, leave: &v} }
	tests := []struct {
		name  string
		steps []step
	}{
		{"a host takes its limit, then holds the rest; another host is not affected", []step{
			enter("a", true), enter("a", true), held(0, "a", s, 2*s), held(0, "a", s, 2*s),
			enter("b", true), enter("b", true),
			leave(0, "a", answered), enter("a", true),
		}},
		{"the backoff doubles once per backoff while the host stays saturated", []step{
			enter("a", true), enter("a", true),
			held(0, "a", s, 2*s), held(500*time.Millisecond, "a", s, 2*s),
			held(500*time.Millisecond, "a", 2*s, 4*s), held(s, "a", 2*s, 4*s),
			held(s, "a", 4*s, 8*s),
		}},
		{"a quiet backoff starts it again", []step{
			enter("a", true), enter("a", true),
			held(0, "a", s, 2*s), held(s, "a", 2*s, 4*s), held(2*s, "a", 4*s, 8*s),
			held(5*s, "a", s, 2*s),
		}},
		{"a timeout opens the circuit; after the backoff one probe goes, and its answer closes it", []step{
			enter("a", true), leave(10*s, "a", timedOut),
			held(0, "a", 2*s, 3*s), held(500*time.Millisecond, "a", 1500*time.Millisecond, 2500*time.Millisecond),
			enter("b", true),
			step{after: 600 * time.Millisecond, host: "a", pass: true}, held(0, "a", 2*s, 4*s),
			leave(100*time.Millisecond, "a", answered), enter("a", true), enter("a", true),
		}},
		{"a probe that times out opens it for longer", []step{
			enter("a", true), leave(10*s, "a", timedOut),
			step{after: 1100 * time.Millisecond, host: "a", pass: true}, leave(10*s, "a", timedOut),
			held(0, "a", 4*s, 6*s),
		}},
		{"a probe interrupted by flowd lets the next one go", []step{
			enter("a", true), leave(10*s, "a", timedOut),
			step{after: 1100 * time.Millisecond, host: "a", pass: true}, leave(0, "a", interrupted),
			enter("a", true),
		}},
		{"a failure quicker than the timeout closes the circuit", []step{
			enter("a", true), leave(10*s, "a", timedOut),
			step{after: 1100 * time.Millisecond, host: "a", pass: true}, leave(10*time.Millisecond, "a", answered),
			enter("a", true), enter("a", true),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := time.Unix(1_000_000, 0)
			g := newGate(2, time.Second)
			g.now = func() time.Time { return now }
			for i, st := range tt.steps {
				now = now.Add(st.after)
				if st.leave != nil {
					g.leave(st.host, *st.leave)
					continue
				}
				pass, wait := g.enter(st.host)
				switch {
				case pass != st.pass:
					t.Fatalf("step %d: enter %s passed %v, want %v", i, st.host, pass, st.pass)
				case !pass && (wait < st.min || wait >= st.max):
					t.Fatalf("step %d: %s held for %v, want [%v, %v)", i, st.host, wait, st.min, st.max)
				}
			}
		})
	}
}

// TestGateBackoffStopsAtItsCeiling: however long a host stays saturated, a
// held delivery waits less than twice the ceiling.
func TestGateBackoffStopsAtItsCeiling(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	g := newGate(1, time.Second)
	g.now = func() time.Time { return now }
	if pass, _ := g.enter("a"); !pass {
		t.Fatal("the first delivery was held")
	}
	var wait time.Duration
	for range 100 {
		_, wait = g.enter("a")
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
	g := newGate(2, time.Second)
	for _, h := range []string{"a", "b", "c"} {
		if pass, _ := g.enter(h); !pass {
			t.Fatalf("%s was held", h)
		}
		g.leave(h, answered)
	}
	if len(g.hosts) != 0 {
		t.Fatalf("the gate remembers %d hosts", len(g.hosts))
	}
}
