package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/delivery"
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

// DefaultRecoveryBatch is how many events a recovery looks at per
// transaction, sending again those it covers: large enough that a big
// backlog takes few round trips, small enough that a batch holds its locks
// briefly.
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

// recoverySettle is how long a recovery's job waits before it starts: an
// event published in a transaction that began before the request (one that
// still saw the endpoint disabled) may commit a little after it, and on
// Citus a worker's rows become visible a moment after the coordinator's.
// The recovery looks at events once, in order, so it lets them settle.
const recoverySettle = 2 * time.Second

// Recover implements Service.
func (m *Module) Recover(ctx context.Context, organizationID, endpointID string, since time.Time, requestedBy string,
	before ...database.BeforeCommit[Recovery]) (Recovery, error) {
	if !isUUID(endpointID) {
		return Recovery{}, ErrEndpointNotFound
	}
	now := time.Now()
	if err := CheckSince(since, now, m.reach); err != nil {
		return Recovery{}, err
	}
	return m.requestRecovery(ctx, organizationID, since, requestedBy, before, func(tx database.Tx) (store.Scope, error) {
		ep, err := store.GetEndpoint(ctx, tx, organizationID, endpointID, false)
		if err != nil {
			return store.Scope{}, endpointNotFound(err)
		}
		if !ep.Enabled {
			return store.Scope{}, ErrEndpointDisabled
		}
		return m.endpointScope(ep.ID, ep.EventTypes, ep.CreatedAt, now), nil
	})
}

// RecoverFlowURLs implements Service.
func (m *Module) RecoverFlowURLs(ctx context.Context, organizationID string, since time.Time, host, requestedBy string,
	before ...database.BeforeCommit[Recovery]) (Recovery, error) {
	var f apperr.Fields
	if e, ok := apperr.As(CheckSince(since, time.Now(), m.reach)); ok {
		f = append(f, e.Fields...)
	}
	host, ok := NormalizeHost(host)
	if !ok {
		f.Add("host", "must be a host name or address, with a port if the URLs name one, such as hooks.example.com or hooks.example.com:8443")
	}
	if err := f.Err(); err != nil {
		return Recovery{}, err
	}
	return m.requestRecovery(ctx, organizationID, since, requestedBy, before, func(database.Tx) (store.Scope, error) {
		return store.Scope{Host: host}, nil
	})
}

// MissedSince implements Service.
func (m *Module) MissedSince(e Endpoint, now time.Time) (time.Time, bool) {
	since := now
	switch {
	case e.FailingSince != nil:
		since = e.FailingSince.Add(-m.holdLimit)
	case e.DisabledAt != nil:
		since = *e.DisabledAt
	}
	if oldest, _ := m.reach.Oldest(now); since.Before(oldest) {
		return oldest, true
	}
	return since, false
}

// endpointScope is what a recovery of an endpoint with types, created at
// created, covers in a batch run at now.
func (m *Module) endpointScope(endpointID string, types []string, created, now time.Time) store.Scope {
	return store.Scope{EndpointID: endpointID, Types: types, MissedFrom: latest(created, now.Add(-m.reach.Deliveries))}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// requestRecovery stores a queued recovery of what scope, read in the
// request's transaction, says, and its job, which starts recoverySettle
// later; before runs in the same transaction.
func (m *Module) requestRecovery(ctx context.Context, organizationID string, since time.Time, requestedBy string,
	before []database.BeforeCommit[Recovery], scope func(tx database.Tx) (store.Scope, error)) (Recovery, error) {
	id := uuid.Must(uuid.NewV7()).String()
	var out Recovery
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		s, err := scope(tx)
		if err != nil {
			return err
		}
		row, err := store.InsertRecovery(ctx, tx, store.NewRecovery{OrganizationID: organizationID, ID: id, Scope: s,
			Since: since, RequestedBy: requestedBy})
		if database.IsUniqueViolation(err, store.RecoveryActiveIndex) || database.IsUniqueViolation(err, store.RecoveryFlowURLsActiveIndex) {
			return ErrRecoveryRunning
		}
		if err != nil {
			return err
		}
		if _, err := m.river.InsertTx(ctx, tx, recoveryArgs{OrganizationID: organizationID, RecoveryID: id},
			&river.InsertOpts{Queue: recoveryQueue, MaxAttempts: recoveryAttempts, ScheduledAt: time.Now().Add(recoverySettle)}); err != nil {
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
	if !isUUID(endpointID) {
		return Recovery{}, ErrRecoveryNotFound
	}
	return m.recovery(ctx, organizationID, endpointID, id)
}

// FlowURLRecovery implements Service.
func (m *Module) FlowURLRecovery(ctx context.Context, organizationID, id string) (Recovery, error) {
	return m.recovery(ctx, organizationID, "", id)
}

// recovery returns a recovery of the endpoint, or of the flows' own URLs
// when endpointID is empty.
func (m *Module) recovery(ctx context.Context, organizationID, endpointID, id string) (Recovery, error) {
	if !isUUID(id) {
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
	return m.recoveries(ctx, organizationID, endpointID)
}

// FlowURLRecoveries implements Service.
func (m *Module) FlowURLRecoveries(ctx context.Context, organizationID string) ([]Recovery, error) {
	return m.recoveries(ctx, organizationID, "")
}

func (m *Module) recoveries(ctx context.Context, organizationID, endpointID string) ([]Recovery, error) {
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
	return Recovery{ID: r.ID, EndpointID: r.EndpointID, Host: r.Host, Since: r.Since, State: RecoveryState(r.State), Total: r.Total,
		Scheduled: r.Scheduled, RequestedBy: r.RequestedBy, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt,
		FinishedAt: r.FinishedAt, Error: r.Error}
}

// recoveryWorker is River's worker of recovery jobs.
type recoveryWorker struct {
	river.WorkerDefaults[recoveryArgs]
	m *Module
}

// Work runs batches of the recovery until none is left or recoveryRunFor
// has passed, when it snoozes to go on at once. A run that dies loses at
// most its uncommitted batch, which the next run takes again: nothing is
// sent twice by the recovery itself. A recovery it cannot read yet it
// awaits (awaitRow).
func (w *recoveryWorker) Work(ctx context.Context, job *river.Job[recoveryArgs]) error {
	a := job.Args
	until := time.Now().Add(recoveryRunFor)
	for {
		more, err := w.m.recoverBatch(ctx, a.OrganizationID, a.RecoveryID)
		if errors.Is(err, errRecoveryGone) {
			return delivery.AwaitRow(job.JobRow, time.Now())
		}
		if err != nil {
			w.m.log.ErrorContext(ctx, "webhook recovery: a batch failed", "recovery_id", a.RecoveryID, "attempt", job.Attempt, "error", err.Error())
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

// recoverBatch runs the next batch of a recovery, in one transaction: it
// looks at the next recoveryBatch events of the recovery's window, makes
// the deliveries of them it covers pending again (to the endpoint's URL of
// now) and adds a delivery to the endpoint of each it covers that had
// none, each with a new job at backlogPriority, and moves the recovery's
// cursor and progress past them, so that the batch is all or nothing. It
// reports whether more may follow; the batch that finds fewer events than
// a full batch ends the recovery. A recovery of an endpoint deleted or
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
		scope, url := store.Scope{Host: r.Host}, ""
		if r.EndpointID != "" {
			switch {
			case r.EndpointURL == nil || r.EndpointCreatedAt == nil:
				return store.FinishRecovery(ctx, tx, organizationID, id, store.RecoveryFailed, "The endpoint was deleted.")
			case !r.EndpointEnabled:
				return store.FinishRecovery(ctx, tx, organizationID, id, store.RecoveryFailed, "The endpoint was disabled.")
			}
			scope, url = m.endpointScope(r.EndpointID, r.EndpointTypes, *r.EndpointCreatedAt, time.Now()), *r.EndpointURL
		}
		events, err := store.ScanRecovery(ctx, tx, r, scope, m.recoveryBatch)
		if err != nil {
			return err
		}
		if len(events) > 0 {
			if err := m.scheduleBatch(ctx, tx, r, url, events); err != nil {
				return err
			}
		}
		if len(events) < m.recoveryBatch {
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
func (m *Module) scheduleBatch(ctx context.Context, tx database.Tx, r store.RecoveryRun, url string, events []store.Scanned) error {
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
	ids, jobs, err := m.claimTx(ctx, tx, r.OrganizationID, r.EndpointID, url, resets, missed, backlogPriority)
	if err != nil {
		return err
	}
	return store.ScheduleBatch(ctx, tx, r.OrganizationID, r.ID, ids, jobs, events[len(events)-1])
}

// claimTx makes the failed deliveries resets pending again and adds the
// missed ones to the endpoint, at url (see store.ClaimDeliveries), and
// inserts a job at priority for each it claimed. It returns the claimed
// deliveries with their jobs, which the caller records on them.
func (m *Module) claimTx(ctx context.Context, tx database.Tx, organizationID, endpointID, url string,
	resets []string, missed []store.Missed, priority int) ([]string, []int64, error) {
	if len(resets)+len(missed) == 0 {
		return nil, nil, nil
	}
	ids, err := store.ClaimDeliveries(ctx, tx, organizationID, endpointID, url, resets, missed)
	if err != nil || len(ids) == 0 {
		return nil, nil, err
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, d := range ids {
		params[i] = river.InsertManyParams{Args: delivery.Args{OrganizationID: organizationID, EventID: d},
			InsertOpts: &river.InsertOpts{Queue: delivery.Queue, Priority: priority}}
	}
	res, err := m.river.InsertManyTx(ctx, tx, params)
	if err != nil {
		return nil, nil, fmt.Errorf("enqueue: %w", err)
	}
	jobs := make([]int64, len(res))
	for i, j := range res {
		jobs[i] = j.Job.ID
	}
	return ids, jobs, nil
}
