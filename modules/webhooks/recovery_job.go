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
	"github.com/flowd/flowd/modules/webhooks/internal/recovery"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// DefaultRecoveryBatch is how many events a recovery looks at per
// transaction, sending again those it covers: large enough that a big
// backlog takes few round trips, small enough that a batch holds its locks
// briefly.
const DefaultRecoveryBatch = 1000

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
// request's transaction, says, and its job, which starts recovery.Settle
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
		if _, err := m.river.InsertTx(ctx, tx, recovery.Args{OrganizationID: organizationID, RecoveryID: id},
			&river.InsertOpts{Queue: recovery.Queue, MaxAttempts: recovery.Attempts, ScheduledAt: time.Now().Add(recovery.Settle)}); err != nil {
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
	if errors.Is(err, database.ErrNotFound) {
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
