package flows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/jobmetrics"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/webhooks"
)

// An acceptance whose Evidence.ValidUntil passes becomes Expired
// (flow.expired). RecordDecisionTx schedules a River job for the moment in the
// acceptance's own transaction, and an hourly sweep expires whatever is due
// without one: acceptances from before expiry existed, and jobs River gave
// up on. Both expire through store.ExpireAcceptance, whose conditional update
// changes a flow at most once, so that the event goes out exactly once
// however many instances, jobs and sweeps meet on one flow.
//
// The jobs live in River tables of their own (database.FlowsRiverSchema):
// River elects one leader per schema, and only the leader schedules,
// rescues and runs periodic jobs, for the kinds its own client knows. Beside
// the webhooks module's client, ours would otherwise lead now and then and
// discard the webhook jobs it rescued, or never lead and never sweep.

// expiryQueue is the River queue of consent expiry.
const expiryQueue = "consent-expiry"

// expiryArgs name the acceptance to expire, nothing personal.
type expiryArgs struct {
	OrganizationID string `json:"organization_id"`
	FlowID         string `json:"flow_id"`
}

// Kind names the job kind in River's table.
func (expiryArgs) Kind() string { return "flowd.consent_expiry" }

// expirySweepArgs start a sweep of the due acceptances.
type expirySweepArgs struct{}

// Kind names the job kind in River's table.
func (expirySweepArgs) Kind() string { return "flowd.consent_expiry_sweep" }

// expirySweepInterval is how often the leader sweeps, and once when it starts.
const expirySweepInterval = time.Hour

// newExpiryJobs builds the River client of m's expiry jobs. It only inserts
// until RunExpiry starts it. Its configuration is fixed, so an error is a
// programming error and panics, as a metric registered twice does.
func newExpiryJobs(m *Manager, reg prometheus.Registerer) *river.Client[pgx.Tx] {
	workers := river.NewWorkers()
	river.AddWorker(workers, &expiryWorker{m: m})
	river.AddWorker(workers, &expirySweepWorker{m: m})
	river.AddWorker(workers, &retentionSweepWorker{m: m})
	client, err := river.NewClient(riverpgxv5.New(m.pool), &river.Config{
		Schema:     database.FlowsRiverSchema,
		Logger:     slog.New(warnings{m.log.Handler()}),
		Queues:     map[string]river.QueueConfig{expiryQueue: {MaxWorkers: 10}},
		Workers:    workers,
		Middleware: m.cfg.ExpiryMiddleware,
		Hooks:      []rivertype.Hook{jobmetrics.Hook(reg)},
		// Polling, rather than River's LISTEN, keeps no connection of the
		// API's pool busy; expiry is due to the second, not the millisecond.
		PollOnly:             true,
		FetchPollInterval:    m.cfg.ExpiryPollInterval,
		FetchCooldown:        min(m.cfg.ExpiryPollInterval, 100*time.Millisecond),
		JobTimeout:           30 * time.Second,
		RescueStuckJobsAfter: time.Minute,
		SoftStopTimeout:      10 * time.Second,
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(expirySweepInterval),
			func() (river.JobArgs, *river.InsertOpts) {
				return expirySweepArgs{}, &river.InsertOpts{Queue: expiryQueue, MaxAttempts: 3}
			}, &river.PeriodicJobOpts{ID: "flows-consent-expiry-sweep", RunOnStart: true}), retentionPeriodicJob()},
	})
	if err != nil {
		panic(fmt.Sprintf("flows: expiry jobs: %v", err))
	}
	return client
}

// scheduleExpiryTx schedules, in tx, the expiry of f when it is an
// acceptance with a validity.
func (m *Manager) scheduleExpiryTx(ctx context.Context, tx pgx.Tx, f Flow) error {
	if f.ConsentStatus != Accepted || f.Evidence.ValidUntil == nil {
		return nil
	}
	_, err := m.jobs.InsertTx(ctx, tx, expiryArgs{OrganizationID: f.OrganizationID, FlowID: f.ID},
		&river.InsertOpts{Queue: expiryQueue, ScheduledAt: *f.Evidence.ValidUntil})
	if err != nil {
		return fmt.Errorf("flows: schedule expiry: %w", database.Classify(err))
	}
	return nil
}

// RunExpiry runs the expiry workers until ctx ends, then lets running jobs
// finish for a few seconds, and returns once they have. Several instances
// on one database share the jobs; their leader sweeps. It returns an error
// only when the workers cannot start.
func (m *Manager) RunExpiry(ctx context.Context) error {
	if err := m.jobs.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil //nolint:nilerr // told to stop before the workers started: nothing failed
		}
		return fmt.Errorf("flows: expiry: %w", err)
	}
	<-m.jobs.Stopped()
	return nil
}

// ExpireDueAcceptances expires up to limit acceptances whose validity has
// ended (flow.expired each) and returns how many it expired. An acceptance
// another transaction changes meanwhile is for store.ExpireAcceptance to
// decide on, after that one.
func (m *Manager) ExpireDueAcceptances(ctx context.Context, limit int) (int, error) {
	due, err := store.DueAcceptances(ctx, m.pool, limit)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	n := 0
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		for _, d := range due {
			expired, err := m.expireTx(ctx, tx, d.OrganizationID, d.ID)
			if err != nil {
				return err
			}
			if expired {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// expireAcceptance expires one acceptance when it is due. When it is
// accepted and not yet due, it returns how long until it is.
func (m *Manager) expireAcceptance(ctx context.Context, organizationID, flowID string) (time.Duration, error) {
	var wait time.Duration
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		expired, err := m.expireTx(ctx, tx, organizationID, flowID)
		if err != nil || expired {
			return err
		}
		row, err := store.GetFlow(ctx, tx, organizationID, flowID, false)
		if errors.Is(err, store.ErrNoRows) {
			return nil // deleted
		}
		if err != nil {
			return err
		}
		if row.ConsentStatus == string(Accepted) && row.ValidUntil != nil {
			// At least a second: the database's clock decides, and ours may be ahead.
			wait = max(time.Until(*row.ValidUntil), time.Second)
		}
		return nil
	})
	return wait, err
}

// expireTx expires the acceptance in tx with its flow.expired event when it
// is due, and reports whether it did.
func (m *Manager) expireTx(ctx context.Context, tx pgx.Tx, organizationID, flowID string) (bool, error) {
	row, err := store.ExpireAcceptance(ctx, tx, organizationID, flowID)
	if errors.Is(err, store.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f, err := m.toFlow(row)
	if err != nil {
		return false, err
	}
	return true, m.publishTx(ctx, tx, f, webhooks.FlowExpired)
}

// expiryWorker expires one acceptance once it is due. A flow withdrawn or
// deleted meanwhile, or expired already, is nothing to do; one not yet due
// waits.
type expiryWorker struct {
	river.WorkerDefaults[expiryArgs]
	m *Manager
}

func (w *expiryWorker) Work(ctx context.Context, job *river.Job[expiryArgs]) error {
	if !validID(job.Args.FlowID) {
		return river.JobCancel(errors.New("not a flow id"))
	}
	wait, err := w.m.expireAcceptance(ctx, job.Args.OrganizationID, job.Args.FlowID)
	if err != nil {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	return nil
}

// expirySweepWorker expires every due acceptance, a hundred at a time.
type expirySweepWorker struct {
	river.WorkerDefaults[expirySweepArgs]
	m *Manager
}

// Timeout lets a sweep of a long backlog run past the per-flow jobs' timeout.
func (w *expirySweepWorker) Timeout(*river.Job[expirySweepArgs]) time.Duration {
	return 10 * time.Minute
}

func (w *expirySweepWorker) Work(ctx context.Context, _ *river.Job[expirySweepArgs]) error {
	const batch = 100
	for {
		n, err := w.m.ExpireDueAcceptances(ctx, batch)
		if err != nil || n < batch {
			return err
		}
	}
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
