package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilPollsUntilDoneOrTheDeadline(t *testing.T) {
	t.Parallel()
	n := 0
	saw, ok := Until(time.Now().Add(time.Hour), func() (bool, string) {
		n++
		return n == 3, fmt.Sprintf("try %d", n)
	})
	if !ok || saw != "try 3" {
		t.Fatalf("Until: %q, %v; want done on the third try", saw, ok)
	}
	saw, ok = Until(time.Now(), func() (bool, string) { return false, "still starting" })
	if ok || saw != "still starting" {
		t.Fatalf("Until past its deadline: %q, %v", saw, ok)
	}
}

func TestForFailsSayingWhatItSaw(t *testing.T) {
	t.Parallel()
	var f fakeT
	f.deadline = time.Now().Add(margin) // the wait gives up at once
	For(&f, "flowd to be ready", func() (bool, string) { return false, "readyz 503" })
	if !strings.Contains(f.failure, "for flowd to be ready; saw readyz 503") {
		t.Fatalf("the failure says %q", f.failure)
	}
	if d := Deadline(t); time.Until(d) <= 0 {
		t.Fatalf("this test's waits would give up at %v, already past", d)
	}
}

// fakeT is a test with a deadline whose Fatalf records what it says.
type fakeT struct {
	testing.TB
	deadline time.Time
	failure  string
}

func (f *fakeT) Helper()                           {}
func (f *fakeT) Deadline() (time.Time, bool)       { return f.deadline, true }
func (f *fakeT) Fatalf(format string, args ...any) { f.failure = fmt.Sprintf(format, args...) }
