// Package testwait is how a test waits for what happens in its own time (a
// server getting ready, a webhook arriving, a worker's next round): it polls
// until the test binary's deadline, not for a fixed while, and when that
// passes it says what it saw last. A loaded machine makes such a test slower,
// never failed; a test that hangs still ends with a message.
package testwait

import (
	"testing"
	"time"
)

// margin is the time left, after a wait gave up, for the test to report and
// clean up before go test's -timeout panics the binary.
const margin = 30 * time.Second

// noDeadline is how long a wait may take when the test has no deadline
// (go test -timeout 0).
const noDeadline = 10 * time.Minute

// Deadline is when a wait in t gives up: shortly before the test binary's
// deadline.
func Deadline(t testing.TB) time.Time {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if at, ok := d.Deadline(); ok {
			return at.Add(-margin)
		}
	}
	return time.Now().Add(noDeadline)
}

// For polls check until it reports done, and fails t when Deadline passes
// first, naming what it waited for and the last thing check saw.
func For(t testing.TB, what string, check func() (done bool, saw string)) {
	t.Helper()
	start := time.Now()
	if saw, ok := Until(Deadline(t), check); !ok {
		t.Fatalf("waited %s for %s; saw %s", time.Since(start).Round(time.Second), what, saw)
	}
}

// Until polls check until it reports done or deadline passes, and returns
// what check saw last and whether it was done. The polls start 10 ms apart and
// slow to 250 ms.
func Until(deadline time.Time, check func() (done bool, saw string)) (string, bool) {
	pause := 10 * time.Millisecond
	for {
		done, saw := check()
		if done {
			return saw, true
		}
		if time.Now().After(deadline) {
			return saw, false
		}
		time.Sleep(pause)
		pause = min(pause*3/2, 250*time.Millisecond)
	}
}
