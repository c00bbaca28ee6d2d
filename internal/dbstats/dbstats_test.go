package dbstats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/dbstats"
)

// TestCollectorSharesAReadAndDropsAFailedOne: scrapes within MaxAge of a
// read use its result; a later scrape reads again; a read that fails gives
// the scrape nothing, and the next scrape reads again rather than keeping
// the failure.
func TestCollectorSharesAReadAndDropsAFailedOne(t *testing.T) {
	t.Parallel()
	desc := prometheus.NewDesc("flowd_test_figure", "A figure.", nil, nil)
	now := time.Unix(1000, 0)
	var (
		reads int
		fail  bool
	)
	c := dbstats.New([]*prometheus.Desc{desc}, func(ctx context.Context) ([]prometheus.Metric, error) {
		reads++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a read without a deadline")
		}
		if fail {
			return nil, errors.New("database down")
		}
		return []prometheus.Metric{prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(reads))}, nil
	}, dbstats.Options{MaxAge: 5 * time.Second, Now: func() time.Time { return now }})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	scrape := func() (float64, bool) {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if len(families) == 0 {
			return 0, false
		}
		return families[0].GetMetric()[0].GetGauge().GetValue(), true
	}
	steps := []struct {
		advance time.Duration
		fail    bool
		want    float64 // 0: no figure
		reads   int
	}{
		{0, false, 1, 1},
		{4 * time.Second, false, 1, 1}, // within MaxAge: the same read
		{time.Second, false, 2, 2},     // MaxAge passed
		{5 * time.Second, true, 0, 3},  // the read fails: nothing
		{0, false, 4, 4},               // and is not kept
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		fail = s.fail
		got, ok := scrape()
		if (s.want == 0) == ok || got != s.want || reads != s.reads {
			t.Errorf("step %d: figure %v (present %v) after %d reads, want %v after %d", i, got, ok, reads, s.want, s.reads)
		}
	}
}
