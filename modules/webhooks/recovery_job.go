package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// backlogPriority is the River priority of the deliveries a recovery sends
// again. River fetches a queue's jobs by priority before age, and fresh
// events go in at priority 1, so a recovery's backlog never delays them: it
// is sent while the workers have nothing fresher to do.
const backlogPriority = 3

// recoveryQueue is the River queue of recovery jobs. A queue of their own,
// with few workers, keeps a recovery from taking a delivery's worker, and
// keeps the next run of a recovery from waiting behind the deliveries its
// earlier runs scheduled in the webhooks queue.
const recoveryQueue = "webhook_recoveries"

// recoveryWorkers is how many recoveries one instance runs at once; each
// holds a database connection while it writes a batch.
const recoveryWorkers = 2

// DefaultRecoveryBatch is how many deliveries a recovery sends again per
// transaction: large enough that a big backlog takes few round trips, small
// enough that a batch holds its locks briefly.
const DefaultRecoveryBatch = 1000

// recoveryRunFor bounds one run of a recovery job. The job then snoozes,
// to run again at once, so that no run outlives the job timeout or looks
// stuck to River's rescuer, which would run it a second time beside itself.
const recoveryRunFor = 5 * time.Second

// recoveryAttempts is how often a recovery job runs into an error before
// the recovery fails: with the deliveries' schedule, a database that is back
// within about half an hour lets it go on, and a lasting fault does not hold
// the endpoint's one recovery for a day.
const recoveryAttempts = 4

// recoveryArgs are a recovery job's arguments: the recovery's row holds
// the rest.
type recoveryArgs struct {
	OrganizationID string `json:"organization_id"`
	RecoveryID     string `json:"recovery_id"`
}

// Kind names the job kind in River's table.
func (recoveryArgs) Kind() string { return "flowd.webhook_recovery" }

// Recover implements Service.
func (m *Module) Recover(ctx context.Context, organizationID, endpointID string, since time.Time, requestedBy string,
	before ...database.BeforeCommit[Recovery]) (Recovery, error) {
	if !isUUID(endpointID) {
		return Recovery{}, ErrEndpointNotFound
	}
	if err := CheckSince(since, time.Now()); err != nil {
		return Recovery{}, err
	}
	id := uuid.Must(uuid.NewV7()).String()
	var out Recovery
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		ep, err := store.GetEndpoint(ctx, tx, organizationID, endpointID, false)
		if err != nil {
			return endpointNotFound(err)
		}
		if !ep.Enabled {
			return ErrEndpointDisabled
		}
		row, err := store.InsertRecovery(ctx, tx, organizationID, id, endpointID, since, requestedBy)
		if database.IsUniqueViolation(err, store.RecoveryActiveIndex) {
			return ErrRecoveryRunning
		}
		if err != nil {
			return err
		}
		if _, err := m.river.InsertTx(ctx, tx, recoveryArgs{OrganizationID: organizationID, RecoveryID: id},
			&river.InsertOpts{Queue: recoveryQueue, MaxAttempts: recoveryAttempts}); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		out = fromRecoveryRow(row)
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil && !errors.Is(err, ErrEndpointNotFound) && !errors.Is(err, ErrEndpointDisabled) && !errors.Is(err, ErrRecoveryRunning) {
		return Recovery{}, fmt.Errorf("webhooks: recover: %w", database.Classify(err))
	}
	return out, err
}

// Recovery implements Service.
func (m *Module) Recovery(ctx context.Context, organizationID, endpointID, id string) (Recovery, error) {
	if !isUUID(endpointID) || !isUUID(id) {
		return Recovery{}, ErrRecoveryNotFound
	}
	row, err := store.GetRecovery(ctx, m.pool, organizationID, endpointID, id)
	if errors.Is(err, store.ErrNotFound) {
		return Recovery{}, ErrRecoveryNotFound
	}
	if err != nil {
		return Recovery{}, fmt.Errorf("webhooks: recovery: %w", database.Classify(err))
	}
	return fromRecoveryRow(row), nil
}

// Recoveries implements Service.
func (m *Module) Recoveries(ctx context.Context, organizationID, endpointID string) ([]Recovery, error) {
	if !isUUID(endpointID) {
		return nil, ErrEndpointNotFound
	}
	if _, err := store.GetEndpoint(ctx, m.pool, organizationID, endpointID, false); err != nil {
		return nil, endpointNotFound(err)
	}
	rows, err := store.ListRecoveries(ctx, m.pool, organizationID, endpointID, RecoveriesShown)
	if err != nil {
		return nil, fmt.Errorf("webhooks: recoveries: %w", database.Classify(err))
	}
	out := make([]Recovery, len(rows))
	for i, r := range rows {
		out[i] = fromRecoveryRow(r)
	}
	return out, nil
}

func fromRecoveryRow(r store.Recovery) Recovery {
	return Recovery{ID: r.ID, EndpointID: r.EndpointID, Since: r.Since, State: RecoveryState(r.State), Total: r.Total,
		Scheduled: r.Scheduled, RequestedBy: r.RequestedBy, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt,
		FinishedAt: r.FinishedAt, Error: r.Error}
}

// recoveryWorker is River's worker of recovery jobs.
type recoveryWorker struct {
	river.WorkerDefaults[recoveryArgs]
	m *Module
}

// Work sends batches of the recovery's failed deliveries again until none
// is left or recoveryRunFor has passed, when it snoozes to go on at once. A
// run that dies loses at most its uncommitted batch, which the next run
// takes again: nothing is sent twice by the recovery itself. A recovery it
// cannot read yet it awaits (awaitRow).
func (w *recoveryWorker) Work(ctx context.Context, job *river.Job[recoveryArgs]) error {
	a := job.Args
	until := time.Now().Add(recoveryRunFor)
	for {
		more, err := w.m.recoverBatch(ctx, a.OrganizationID, a.RecoveryID)
		if errors.Is(err, errRecoveryGone) {
			return awaitRow(job.JobRow, time.Now())
		}
		if err != nil {
			w.m.log.Error("webhook recovery: a batch failed", "recovery_id", a.RecoveryID, "attempt", job.Attempt, "error", err.Error())
			if job.Attempt >= job.MaxAttempts {
				w.m.failRecovery(a.OrganizationID, a.RecoveryID, "An internal error stopped the recovery; the deliveries sent so far are on their way.")
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

// failRecovery ends a recovery that its job gave up on, so that the endpoint
// may be recovered again.
func (m *Module) failRecovery(organizationID, id, message string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.FinishRecovery(ctx, m.pool, organizationID, id, store.RecoveryFailed, message); err != nil {
		m.log.Error("webhook recovery: recording its failure", "recovery_id", id, "error", err.Error())
	}
}

// errRecoveryGone is a recovery its job cannot read: not visible yet (see
// rowVisibleWithin), or pruned long after it finished.
var errRecoveryGone = errors.New("webhooks: the recovery is not there")

// recoverBatch sends the next batch of a recovery's failed deliveries
// again, in one transaction: each delivery is made pending with a new job
// at backlogPriority, to the endpoint's URL of now, and the recovery's
// cursor and progress move past them, so that the batch is all or nothing.
// It reports whether more may follow; the batch that finds fewer than a
// full batch ends the recovery. A recovery of an endpoint deleted or
// disabled meanwhile fails; one that cannot be read is errRecoveryGone.
func (m *Module) recoverBatch(ctx context.Context, organizationID, id string) (more bool, err error) {
	err = database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		r, err := store.LockRecovery(ctx, tx, organizationID, id)
		if errors.Is(err, store.ErrNotFound) {
			return errRecoveryGone
		}
		if err != nil {
			return err
		}
		if !RecoveryState(r.State).Active() {
			return nil
		}
		switch {
		case r.EndpointURL == nil:
			return store.FinishRecovery(ctx, tx, organizationID, id, store.RecoveryFailed, "The endpoint was deleted.")
		case !r.EndpointEnabled:
			return store.FinishRecovery(ctx, tx, organizationID, id, store.RecoveryFailed, "The endpoint was disabled.")
		}
		batch, err := store.NextFailed(ctx, tx, r, m.recoveryBatch)
		if err != nil {
			return err
		}
		if len(batch) > 0 {
			ids := make([]string, len(batch))
			params := make([]river.InsertManyParams, len(batch))
			for i, d := range batch {
				ids[i] = d.ID
				params[i] = river.InsertManyParams{Args: deliveryArgs{OrganizationID: organizationID, EventID: d.ID},
					InsertOpts: &river.InsertOpts{Queue: queue, Priority: backlogPriority}}
			}
			res, err := m.river.InsertManyTx(ctx, tx, params)
			if err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			jobs := make([]int64, len(res))
			for i, j := range res {
				jobs[i] = j.Job.ID
			}
			if err := store.ScheduleBatch(ctx, tx, organizationID, id, *r.EndpointURL, ids, jobs, batch[len(batch)-1]); err != nil {
				return err
			}
		}
		if len(batch) < m.recoveryBatch {
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
