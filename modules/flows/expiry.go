package flows

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/webhooks"
)

// An acceptance whose Evidence.ValidUntil passes becomes Expired
// (flow.expired). RecordDecisionTx schedules a River job (internal/expiry)
// for the moment in the acceptance's own transaction, and an hourly sweep
// expires whatever is due without one: acceptances from before expiry
// existed, and jobs River gave up on. Both expire through
// store.ExpireAcceptance, whose conditional update changes a flow at most
// once, so that the event goes out exactly once however many instances,
// jobs and sweeps meet on one flow.

// scheduleExpiryTx schedules, in tx, the expiry of f when it is an
// acceptance with a validity.
func (m *Manager) scheduleExpiryTx(ctx context.Context, tx pgx.Tx, f Flow) error {
	if f.ConsentStatus != Accepted || f.Evidence.ValidUntil == nil {
		return nil
	}
	return m.jobs.ScheduleTx(ctx, tx, f.OrganizationID, f.ID, *f.Evidence.ValidUntil)
}

// RunExpiry runs the expiry workers until ctx ends, then lets running jobs
// finish for a few seconds, and returns once they have. Several instances
// on one database share the jobs; their leader sweeps. It returns an error
// only when the workers cannot start.
func (m *Manager) RunExpiry(ctx context.Context) error {
	return m.jobs.Run(ctx)
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
		if errors.Is(err, database.ErrNotFound) {
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
	if errors.Is(err, database.ErrNotFound) {
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
