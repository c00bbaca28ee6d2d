package jobmetrics_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/jobmetrics"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/syncbuf"
)

// TestHookCountsOutcomes: each way a job's attempt can end is counted under
// its outcome, and a second River client on the registry shares the counts.
func TestHookCountsOutcomes(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	first, second := jobmetrics.Hook(reg).(rivertype.HookWorkEnd), jobmetrics.Hook(reg).(rivertype.HookWorkEnd)
	now := time.Now()
	job := func(attempt, max int) *rivertype.JobRow {
		return &rivertype.JobRow{Queue: "q", Kind: "k", Attempt: attempt, MaxAttempts: max, AttemptedAt: &now}
	}
	failed := errors.New("receiver down")
	for _, c := range []struct {
		hook rivertype.HookWorkEnd
		job  *rivertype.JobRow
		err  error
	}{
		{first, job(1, 3), nil},
		{second, job(1, 3), nil},
		{first, job(1, 3), failed},
		{first, job(3, 3), failed},
		{second, job(1, 3), river.JobSnooze(time.Second)},
		{first, job(1, 3), river.JobCancel(failed)},
	} {
		if got := c.hook.WorkEnd(context.Background(), c.job, c.err); got != c.err { //nolint:errorlint // the very error must pass through
			t.Errorf("WorkEnd changed the error %v to %v", c.err, got)
		}
	}
	got := scrape(t, reg, "flowd_river_jobs_worked_total{")
	want := []string{
		`flowd_river_jobs_worked_total{kind="k",outcome="cancelled",queue="q"} 1`,
		`flowd_river_jobs_worked_total{kind="k",outcome="completed",queue="q"} 2`,
		`flowd_river_jobs_worked_total{kind="k",outcome="discarded",queue="q"} 1`,
		`flowd_river_jobs_worked_total{kind="k",outcome="retried",queue="q"} 1`,
		`flowd_river_jobs_worked_total{kind="k",outcome="snoozed",queue="q"} 1`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("scraped:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := scrape(t, reg, `flowd_river_job_duration_seconds_count{kind="k",queue="q"}`); len(got) != 1 || !strings.HasSuffix(got[0], " 6") {
		t.Errorf("durations: %v, want 6 attempts timed", got)
	}
}

// scrape serves reg over HTTP and returns the lines of its answer that
// start with prefix.
func scrape(t *testing.T, reg *prometheus.Registry, prefix string) []string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, prefix) {
			got = append(got, line)
		}
	}
	return got
}

// TestQueuesCountsEachSchema stores jobs in both River schemas and scrapes
// the collector over HTTP: unfinished and discarded jobs are counted by
// queue and state, completed ones are not.
func TestQueuesCountsEachSchema(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	for _, table := range []string{"river_job", "flows_river.river_job"} {
		if _, err := pool.Exec(ctx, `insert into `+table+` (args, kind, max_attempts, queue, state, finalized_at) values
			('{}', 'k', 3, 'a', 'available', null), ('{}', 'k', 3, 'a', 'available', null), ('{}', 'k', 3, 'a', 'retryable', null),
			('{}', 'k', 3, 'a', 'completed', now()), ('{}', 'k', 3, 'b', 'discarded', now())`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `update flows_river.river_job set queue = 'consent_expiry' where queue = 'a'`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var logs syncbuf.Buffer
	reg.MustRegister(jobmetrics.Queues(pool, slog.New(slog.NewTextHandler(&logs, nil))))
	got := scrape(t, reg, "flowd_river_jobs{")
	want := []string{
		`flowd_river_jobs{queue="a",state="available"} 2`,
		`flowd_river_jobs{queue="a",state="retryable"} 1`,
		`flowd_river_jobs{queue="b",state="discarded"} 2`,
		`flowd_river_jobs{queue="consent_expiry",state="available"} 2`,
		`flowd_river_jobs{queue="consent_expiry",state="retryable"} 1`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("scraped:\n%s\nwant:\n%s\nlogs:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), logs.String())
	}
}
