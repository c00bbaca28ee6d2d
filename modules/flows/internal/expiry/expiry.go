// Package expiry runs the River jobs that expire the flows module's
// acceptances: one job per acceptance with a validity, scheduled for the
// moment it ends, and an hourly sweep of whatever is due without one. What
// expiring means is the flows module's: the jobs call its Work.
//
// The jobs live in River tables of their own (database.FlowsRiverSchema):
// River elects one leader per schema, and only the leader schedules,
// rescues and runs periodic jobs, for the kinds its own client knows. Beside
// the webhooks module's client, ours would otherwise lead now and then and
// discard the webhook jobs it rescued, or never lead and never sweep.
package expiry

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
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/jobmetrics"
	"github.com/flowd/flowd/modules/flows/internal/ids"
)

// queue is the River queue of consent expiry.
const queue = "consent-expiry"

// args name the acceptance to expire, nothing personal.
type args struct {
	OrganizationID string `json:"organization_id"`
	FlowID         string `json:"flow_id"`
}

// Kind names the job kind in River's table.
func (args) Kind() string { return "flowd.consent_expiry" }

// sweepArgs start a sweep of the due acceptances.
type sweepArgs struct{}

// Kind names the job kind in River's table.
func (sweepArgs) Kind() string { return "flowd.consent_expiry_sweep" }

// sweepInterval is how often the leader sweeps, and once when it starts.
const sweepInterval = time.Hour

// Work is what the jobs do, as the flows module defines it.
type Work struct {
	// Expire expires one acceptance when it is due. When it is accepted and
	// not yet due, it returns how long until it is.
	Expire func(ctx context.Context, organizationID, flowID string) (time.Duration, error)
	// ExpireDue expires up to limit due acceptances and returns how many.
	ExpireDue func(ctx context.Context, limit int) (int, error)
	// EraseRetained deletes the completed flows past their definition's
	// retention by now, limit to a transaction, and returns how many.
	EraseRetained func(ctx context.Context, now time.Time, limit int) (int, error)
}

// Config holds the settings of the jobs.
type Config struct {
	PollInterval time.Duration          // how often the workers look for due jobs
	Middleware   []rivertype.Middleware // River middleware (tracing's)
}

// Jobs is the River client of the expiry jobs.
type Jobs struct {
	client *river.Client[pgx.Tx]
	log    *slog.Logger
}

// New builds the River client of the expiry jobs on pool, doing work; reg
// receives the jobs' outcomes, log River's warnings. It only inserts until
// Run starts it. Its configuration is fixed, so an error is a programming
// error and panics, as a metric registered twice does.
func New(pool *pgxpool.Pool, work Work, log *slog.Logger, reg prometheus.Registerer, cfg Config) *Jobs {
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{work: work})
	river.AddWorker(workers, &sweepWorker{work: work})
	river.AddWorker(workers, &retentionWorker{work: work})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:     database.FlowsRiverSchema,
		Logger:     slog.New(warnings{log.Handler()}),
		Queues:     map[string]river.QueueConfig{queue: {MaxWorkers: 10}},
		Workers:    workers,
		Middleware: cfg.Middleware,
		Hooks:      []rivertype.Hook{jobmetrics.Hook(reg)},
		// Polling, rather than River's LISTEN, keeps no connection of the
		// API's pool busy; expiry is due to the second, not the millisecond.
		PollOnly:             true,
		FetchPollInterval:    cfg.PollInterval,
		FetchCooldown:        min(cfg.PollInterval, 100*time.Millisecond),
		JobTimeout:           30 * time.Second,
		RescueStuckJobsAfter: time.Minute,
		SoftStopTimeout:      10 * time.Second,
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(sweepInterval),
			func() (river.JobArgs, *river.InsertOpts) {
				return sweepArgs{}, &river.InsertOpts{Queue: queue, MaxAttempts: 3}
			}, &river.PeriodicJobOpts{ID: "flows-consent-expiry-sweep", RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(sweepInterval),
				func() (river.JobArgs, *river.InsertOpts) {
					return retentionArgs{}, &river.InsertOpts{Queue: queue, MaxAttempts: 3}
				}, &river.PeriodicJobOpts{ID: "flows-retention-sweep", RunOnStart: true})},
	})
	if err != nil {
		panic(fmt.Sprintf("flows: expiry jobs: %v", err))
	}
	return &Jobs{client: client, log: log}
}

// ScheduleTx schedules, in tx, the expiry of an organization's acceptance
// at the moment its validity ends.
func (j *Jobs) ScheduleTx(ctx context.Context, tx pgx.Tx, organizationID, flowID string, at time.Time) error {
	_, err := j.client.InsertTx(ctx, tx, args{OrganizationID: organizationID, FlowID: flowID},
		&river.InsertOpts{Queue: queue, ScheduledAt: at})
	if err != nil {
		return fmt.Errorf("flows: schedule expiry: %w", database.Classify(err))
	}
	return nil
}

// Run runs the workers until ctx ends, then lets running jobs finish for a
// few seconds, and returns once they have. It returns an error only when
// the workers cannot start.
func (j *Jobs) Run(ctx context.Context) error {
	if err := database.RetryWhileUnavailable(ctx, j.log, "flows: starting the expiry workers", time.Second, j.client.Start); err != nil {
		if ctx.Err() != nil {
			return nil //nolint:nilerr // told to stop before the workers started: nothing failed
		}
		return fmt.Errorf("flows: expiry: %w", err)
	}
	<-j.client.Stopped()
	return nil
}

// worker expires one acceptance once it is due. A flow withdrawn or
// deleted meanwhile, or expired already, is nothing to do; one not yet due
// waits.
type worker struct {
	river.WorkerDefaults[args]
	work Work
}

func (w *worker) Work(ctx context.Context, job *river.Job[args]) error {
	if !ids.Valid(job.Args.FlowID) {
		return river.JobCancel(errors.New("not a flow id"))
	}
	wait, err := w.work.Expire(ctx, job.Args.OrganizationID, job.Args.FlowID)
	if err != nil {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	return nil
}

// sweepWorker expires every due acceptance, a hundred at a time.
type sweepWorker struct {
	river.WorkerDefaults[sweepArgs]
	work Work
}

// Timeout lets a sweep of a long backlog run past the per-flow jobs' timeout.
func (w *sweepWorker) Timeout(*river.Job[sweepArgs]) time.Duration {
	return 10 * time.Minute
}

func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[sweepArgs]) error {
	const batch = 100
	for {
		n, err := w.work.ExpireDue(ctx, batch)
		if err != nil || n < batch {
			return err
		}
	}
}

// retentionArgs start a sweep of the flows past their retention.
type retentionArgs struct{}

// Kind names the job kind in River's table.
func (retentionArgs) Kind() string { return "flowd.retention_sweep" }

// retentionBatch is how many flows one transaction of the sweep deletes.
const retentionBatch = 100

// retentionWorker deletes the completed flows past their retention.
type retentionWorker struct {
	river.WorkerDefaults[retentionArgs]
	work Work
}

// Timeout lets a sweep of a long backlog run past the per-flow jobs' timeout.
func (w *retentionWorker) Timeout(*river.Job[retentionArgs]) time.Duration {
	return 10 * time.Minute
}

func (w *retentionWorker) Work(ctx context.Context, _ *river.Job[retentionArgs]) error {
	_, err := w.work.EraseRetained(ctx, time.Now(), retentionBatch)
	return err
}

// warnings keeps River's logs to warnings and worse.
type warnings struct{ slog.Handler }

func (h warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnings) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnings{h.Handler.WithAttrs(attrs)}
}

func (h warnings) WithGroup(name string) slog.Handler { return warnings{h.Handler.WithGroup(name)} }
