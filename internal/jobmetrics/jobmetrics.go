// Package jobmetrics measures flowd's River queues: how each job worked
// ended (a River hook every River client of flowd installs), and how many
// jobs wait in each queue (read from River's tables at scrape time).
package jobmetrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/dbstats"
)

// Outcomes of a job worked.
const (
	Completed = "completed" // done
	Retried   = "retried"   // failed, and will be tried again
	Discarded = "discarded" // failed its last attempt
	Snoozed   = "snoozed"   // put off by the worker, not failed
	Cancelled = "cancelled" // given up by the worker
)

// hook counts the jobs worked by outcome and times them.
type hook struct {
	river.HookDefaults
	worked   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var _ rivertype.HookWorkEnd = (*hook)(nil)

// Hook returns the River hook that counts jobs worked in
// flowd_river_jobs_worked_total and times them. Every River client of one
// registry shares its metrics: registering again finds the first ones.
// With a nil reg it counts into metrics no one reads.
func Hook(reg prometheus.Registerer) rivertype.Hook {
	h := &hook{
		worked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowd_river_jobs_worked_total",
			Help: "River jobs worked, by queue, kind and outcome: completed, retried, discarded (last attempt failed), snoozed, cancelled.",
		}, []string{"queue", "kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flowd_river_job_duration_seconds",
			Help:    "Time a River job's attempt took, by queue and kind.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"queue", "kind"}),
	}
	if reg != nil {
		h.worked = registerOnce(reg, h.worked)
		h.duration = registerOnce(reg, h.duration)
	}
	return h
}

// registerOnce registers c, or returns the collector registered before it
// under the same name.
func registerOnce[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("jobmetrics: %v", err))
}

// WorkEnd implements rivertype.HookWorkEnd; it passes err on unchanged.
func (h *hook) WorkEnd(_ context.Context, job *rivertype.JobRow, err error) error {
	h.worked.WithLabelValues(job.Queue, job.Kind, outcome(job, err)).Inc()
	if job.AttemptedAt != nil {
		h.duration.WithLabelValues(job.Queue, job.Kind).Observe(time.Since(*job.AttemptedAt).Seconds())
	}
	return err
}

// outcome names what becomes of job, whose attempt returned err.
func outcome(job *rivertype.JobRow, err error) string {
	var (
		snooze *rivertype.JobSnoozeError
		cancel *rivertype.JobCancelError
	)
	switch {
	case err == nil:
		return Completed
	case errors.As(err, &snooze):
		return Snoozed
	case errors.As(err, &cancel):
		return Cancelled
	case job.Attempt >= job.MaxAttempts:
		return Discarded
	}
	return Retried
}

// queueDepth is flowd_river_jobs: the jobs of each queue not finished, and
// those discarded that River still keeps.
var queueDepth = prometheus.NewDesc("flowd_river_jobs",
	"River jobs by queue and state: available (due), scheduled, retryable (waiting to be retried), running, and discarded (kept for a while after their last attempt failed).",
	[]string{"queue", "state"}, nil)

// countedStates are the states flowd_river_jobs reports. Completed and
// cancelled jobs are left out: River deletes them after a while, and
// counting them would read much of the table.
var countedStates = []string{"available", "scheduled", "retryable", "running", "discarded"}

// Queues returns the collector of flowd_river_jobs, which reads River's
// tables in every schema of database.RiverSchemas through pool.
func Queues(pool *pgxpool.Pool, log *slog.Logger) prometheus.Collector {
	return dbstats.New([]*prometheus.Desc{queueDepth}, func(ctx context.Context) ([]prometheus.Metric, error) {
		// A queue's jobs are summed over the schemas, should two clients
		// share a queue's name.
		counts := map[[2]string]int64{}
		for _, schema := range database.RiverSchemas {
			// Each schema has River's state type of its own.
			table, stateType := pgx.Identifier{"river_job"}, pgx.Identifier{"river_job_state"}
			if schema != "" {
				table, stateType = pgx.Identifier{schema, "river_job"}, pgx.Identifier{schema, "river_job_state"}
			}
			rows, err := pool.Query(ctx, `select queue, state::text, count(*) from `+table.Sanitize()+`
				where state = any($1::text[]::`+stateType.Sanitize()+`[]) group by queue, state`, countedStates)
			if err != nil {
				return nil, err
			}
			var (
				queue, state string
				n            int64
			)
			_, err = pgx.ForEachRow(rows, []any{&queue, &state, &n}, func() error {
				counts[[2]string{queue, state}] += n
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		out := make([]prometheus.Metric, 0, len(counts))
		for k, n := range counts {
			out = append(out, prometheus.MustNewConstMetric(queueDepth, prometheus.GaugeValue, float64(n), k[0], k[1]))
		}
		return out, nil
	}, dbstats.Options{Name: "the depth of River's queues", Log: log})
}
