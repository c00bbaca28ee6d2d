// Package recovery is the job of a webhook recovery: it sends again, batch
// by batch, the failed and missed deliveries a recovery covers, behind fresh
// deliveries, and ends the recovery when none is left.
package recovery

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/delivery"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// BacklogPriority is the River priority of the deliveries a recovery sends
// again. River fetches a queue's jobs by priority before age, and fresh
// events go in at priority 1, so a recovery's backlog never delays them: it
// is sent while the workers have nothing fresher to do.
const BacklogPriority = 3

// Queue is the River queue of recovery jobs. A queue of their own,
// with few workers, keeps a recovery from taking a delivery's worker, and
// keeps the next run of a recovery from waiting behind the deliveries its
// earlier runs scheduled in the webhooks queue.
const Queue = "webhook_recoveries"

// Workers is how many recoveries one instance runs at once; each
// holds a database connection while it writes a batch.
const Workers = 2

// runFor bounds one run of a recovery job. The job then snoozes,
// to run again at once, so that no run outlives the job timeout or looks
// stuck to River's rescuer, which would run it a second time beside itself.
const runFor = 5 * time.Second

// Attempts is how often a recovery job runs into an error before
// the recovery fails: with the deliveries' schedule, a database that is back
// within about half an hour lets it go on, and a lasting fault does not hold
// the endpoint's one recovery for a day.
const Attempts = 4

// Args are a recovery job's arguments: the recovery's row holds
// the rest.
type Args struct {
	OrganizationID string `json:"organization_id"`
	RecoveryID     string `json:"recovery_id"`
}

// Kind names the job kind in River's table.
func (Args) Kind() string { return "flowd.webhook_recovery" }

// Settle is how long a recovery's job waits before it starts: an
// event published in a transaction that began before the request (one that
// still saw the endpoint disabled) may commit a little after it, and on
// Citus a worker's rows become visible a moment after the coordinator's.
// The recovery looks at events once, in order, so it lets them settle.
const Settle = 2 * time.Second

// Config is what a recovery Worker works with.
type Config struct {
	Pool *pgxpool.Pool
	Log  *slog.Logger
	// Batch is how many events a batch looks at.
	Batch int
	// Scope is what a recovery of an endpoint with types, created at
	// created, covers in a batch run at now.
	Scope func(endpointID string, types []string, created, now time.Time) store.Scope
	// Claim makes the failed deliveries resets pending again and adds the
	// missed ones to the endpoint, at url, each with a job at priority, in
	// tx; it returns the claimed deliveries and their jobs.
	Claim func(ctx context.Context, tx database.Tx, organizationID, endpointID, url string,
		resets []string, missed []store.Missed, priority int) ([]string, []int64, error)
}

// NewWorker returns the recovery worker of c.
func NewWorker(c Config) *Worker { return &Worker{c: c} }

// Worker is River's worker of recovery jobs.
type Worker struct {
	river.WorkerDefaults[Args]
	c Config
}

// Work runs batches of the recovery until none is left or runFor
// has passed, when it snoozes to go on at once. A run that dies loses at
// most its uncommitted batch, which the next run takes again: nothing is
// sent twice by the recovery itself. A recovery it cannot read yet it
// awaits (AwaitRow).
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	a := job.Args
	until := time.Now().Add(runFor)
	for {
		more, err := w.RunBatch(ctx, a.OrganizationID, a.RecoveryID)
		if errors.Is(err, errGone) {
			return delivery.AwaitRow(job.JobRow, time.Now())
		}
		if err != nil {
			w.c.Log.ErrorContext(ctx, "webhook recovery: a batch failed", "recovery_id", a.RecoveryID, "attempt", job.Attempt, "error", err.Error())
			if job.Attempt >= job.MaxAttempts {
				w.fail(a.OrganizationID, a.RecoveryID, "An internal error stopped the recovery; the deliveries sent so far are on their way.")
			}
			return err
		}
		if !more {
			return nil
		}
		if time.Now().After(until) {
			return river.JobSnooze(0)
		}
	}
}

// fail ends a recovery that its job gave up on, so that the endpoint
// may be recovered again.
func (w *Worker) fail(organizationID, id, message string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.FinishRecovery(ctx, w.c.Pool, organizationID, id, store.RecoveryFailed, message); err != nil {
		w.c.Log.Error("webhook recovery: recording its failure", "recovery_id", id, "error", err.Error())
	}
}

// errGone is a recovery its job cannot read: not visible yet (see
// delivery.AwaitRow), or pruned long after it finished.
var errGone = errors.New("webhooks: the recovery is not there")

// RunBatch runs the next batch of a recovery, in one transaction: it
// looks at the next Batch events of the recovery's window, makes
// the deliveries of them it covers pending again (to the endpoint's URL of
// now) and adds a delivery to the endpoint of each it covers that had
// none, each with a new job at BacklogPriority, and moves the recovery's
// cursor and progress past them, so that the batch is all or nothing. It
// reports whether more may follow; the batch that finds fewer events than
// a full batch ends the recovery. A recovery of an endpoint deleted or
// disabled meanwhile fails; one that cannot be read is errGone.
func (w *Worker) RunBatch(ctx context.Context, organizationID, id string) (more bool, err error) {
	err = database.WithTx(ctx, w.c.Pool, func(tx database.Tx) error {
		r, err := store.LockRecovery(ctx, tx, organizationID, id)
		if errors.Is(err, database.ErrNotFound) {
			return errGone
		}
		if err != nil {
			return err
		}
		if r.State != store.RecoveryQueued && r.State != store.RecoveryRunning {
			return nil
		}
		scope, url := store.Scope{Host: r.Host}, ""
		if r.EndpointID != "" {
			switch {
			case r.EndpointURL == nil || r.EndpointCreatedAt == nil:
				return store.FinishRecovery(ctx, tx, organizationID, id, store.RecoveryFailed, "The endpoint was deleted.")
			case !r.EndpointEnabled:
				return store.FinishRecovery(ctx, tx, organizationID, id, store.RecoveryFailed, "The endpoint was disabled.")
			}
			scope, url = w.c.Scope(r.EndpointID, r.EndpointTypes, *r.EndpointCreatedAt, time.Now()), *r.EndpointURL
		}
		events, err := store.ScanRecovery(ctx, tx, r, scope, w.c.Batch)
		if err != nil {
			return err
		}
		if len(events) > 0 {
			if err := w.scheduleBatch(ctx, tx, r, url, events); err != nil {
				return err
			}
		}
		if len(events) < w.c.Batch {
			return store.FinishRecovery(ctx, tx, organizationID, id, store.RecoveryDone, "")
		}
		more = true
		return nil
	})
	if err != nil {
		return false, database.Classify(err)
	}
	return more, nil
}

// scheduleBatch sends the events of a batch that the recovery covers
// again, in tx, and moves the recovery past the batch.
func (w *Worker) scheduleBatch(ctx context.Context, tx database.Tx, r store.RecoveryRun, url string, events []store.Scanned) error {
	var resets []string
	var missed []store.Missed
	for _, e := range events {
		switch {
		case !e.Send:
		case e.DeliveryID != nil:
			resets = append(resets, *e.DeliveryID)
		default:
			missed = append(missed, store.Missed{DeliveryID: uuid.Must(uuid.NewV7()).String(), EventID: e.EventID,
				FlowID: e.FlowID, Type: e.Type, Body: e.Body})
		}
	}
	ids, jobs, err := w.c.Claim(ctx, tx, r.OrganizationID, r.EndpointID, url, resets, missed, BacklogPriority)
	if err != nil {
		return err
	}
	return store.ScheduleBatch(ctx, tx, r.OrganizationID, r.ID, ids, jobs, events[len(events)-1])
}
