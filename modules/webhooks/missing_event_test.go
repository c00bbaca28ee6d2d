package webhooks

import (
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// TestAMissingEventIsAwaitedBeforeItsJobEnds: a delivery that cannot read
// its event yet (on Citus the job may be visible before the event) looks
// again soon, without using an attempt; only a job older than
// eventVisibleWithin ends, cancelled.
func TestAMissingEventIsAwaitedBeforeItsJobEnds(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name       string
		age        time.Duration
		wantSnooze bool
	}{
		{"picked up at once", 0, true},
		{"still within the wait", eventVisibleWithin - time.Second, true},
		{"past the wait", eventVisibleWithin, false},
		{"long gone", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := missingEvent(&rivertype.JobRow{CreatedAt: now.Add(-tt.age)}, "e1", now)
			var snooze *river.JobSnoozeError
			var cancel *river.JobCancelError
			switch {
			case tt.wantSnooze && (!errors.As(err, &snooze) || snooze.Duration != missingEventRetry):
				t.Fatalf("%v, want a snooze of %s", err, missingEventRetry)
			case !tt.wantSnooze && !errors.As(err, &cancel):
				t.Fatalf("%v, want a cancellation", err)
			}
		})
	}
}
