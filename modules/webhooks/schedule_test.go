package webhooks

import (
	"testing"
	"time"
)

func TestDefaultScheduleLastsADay(t *testing.T) {
	t.Parallel()
	var total time.Duration
	for _, d := range DefaultSchedule {
		total += d
	}
	if total < 24*time.Hour {
		t.Errorf("DefaultSchedule waits %s in all, want at least 24h", total)
	}
	p := schedulePolicy(DefaultSchedule)
	for n := 1; n <= len(DefaultSchedule)+2; n++ {
		base := DefaultSchedule[min(n, len(DefaultSchedule))-1]
		if w := p.wait(n); w < base || w > base+base/5 {
			t.Errorf("wait(%d) = %s, want within [%s, %s]", n, w, base, base+base/5)
		}
	}
}
