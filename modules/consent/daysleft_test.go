package consent_test

import (
	"testing"
	"time"

	"github.com/flowd/flowd/modules/consent"
)

// TestDaysLeftCountsAsTheDateReads: the days left until a validity ends are
// the calendar days between today's date and the end's date in the
// person's time zone, as the page writes both: a P90D consent given on 7
// December at 10:00 and seen at 12:00 expires "in 90 days", on 7 March;
// across the night Oslo springs forward (a 23-hour day) or falls back (a
// 25-hour one), an end dated tomorrow is a day away and one dated today is
// none, whatever the hours.
func TestDaysLeftCountsAsTheDateReads(t *testing.T) {
	t.Parallel()
	oslo, err := time.LoadLocation("Europe/Oslo")
	if err != nil {
		t.Fatal(err)
	}
	at := func(loc *time.Location, y int, m time.Month, d, h, min int) time.Time {
		return time.Date(y, m, d, h, min, 0, 0, loc)
	}
	given := at(oslo, 2026, time.December, 7, 10, 0)
	for _, c := range []struct {
		name       string
		until, now time.Time
		loc        *time.Location
		want       int
	}{
		{"P90D seen two hours after it was given", given.AddDate(0, 0, 90), given.Add(2 * time.Hour), oslo, 90},
		{"P90D in UTC", given.UTC().AddDate(0, 0, 90), given.UTC().Add(2 * time.Hour), time.UTC, 90},
		{"tomorrow, across spring forward (22h45m away)", at(oslo, 2026, time.March, 29, 23, 15), at(oslo, 2026, time.March, 28, 23, 30), oslo, 1},
		{"tomorrow, across fall back (25h30m away)", at(oslo, 2026, time.October, 25, 23, 30), at(oslo, 2026, time.October, 24, 23, 0), oslo, 1},
		{"a week on, across spring forward", at(oslo, 2026, time.April, 2, 0, 30), at(oslo, 2026, time.March, 26, 23, 45), oslo, 7},
		{"later today", at(oslo, 2026, time.March, 29, 23, 59), at(oslo, 2026, time.March, 29, 0, 1), oslo, 0},
		{"just after midnight in Oslo, still yesterday in UTC", at(oslo, 2026, time.March, 30, 0, 30), at(oslo, 2026, time.March, 29, 12, 0), oslo, 1},
		{"passed", at(oslo, 2026, time.March, 28, 0, 0), at(oslo, 2026, time.March, 29, 0, 0), oslo, 0},
	} {
		if got := consent.DaysLeft(c.until, c.now, c.loc); got != c.want {
			t.Errorf("%s: %d days from %s to %s, want %d", c.name, got, c.now.In(c.loc), c.until.In(c.loc), c.want)
		}
	}
}
