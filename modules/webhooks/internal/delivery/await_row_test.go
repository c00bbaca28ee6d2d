package delivery

import (
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// TestAJobAwaitsItsRowBeforeItEnds: a job that cannot read the row it was
// queued with (on Citus the job may be visible before the row) looks again
// soon, without using an attempt; only a job older than rowVisibleWithin
// gives up.
func TestAJobAwaitsItsRowBeforeItEnds(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name       string
		age        time.Duration
		wantSnooze bool
	}{
		{"picked up at once", 0, true},
		{"still within the wait", rowVisibleWithin - time.Second, true},
		{"past the wait", rowVisibleWithin, false},
		{"long gone", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := AwaitRow(&rivertype.JobRow{CreatedAt: now.Add(-tt.age)}, now)
			var snooze *river.JobSnoozeError
			switch {
			case tt.wantSnooze && (!errors.As(err, &snooze) || snooze.Duration != notVisibleRetry):
				t.Fatalf("%v, want a snooze of %s", err, notVisibleRetry)
			case !tt.wantSnooze && err != nil:
				t.Fatalf("%v, want nil: the row is gone", err)
			}
		})
	}
}
