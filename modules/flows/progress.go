package flows

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/flows/internal/ids"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/webhooks"
)

// MarkOpenedTx locks the organization's flow in tx and moves it from
// Unopened to Opened (flow.opened) while it can still be answered;
// otherwise it changes nothing. It returns the flow as it then is.
// ErrNotFound.
func (m *Manager) MarkOpenedTx(ctx context.Context, tx database.Tx, organizationID, flowID string) (Flow, error) {
	row, err := lockedFlow(ctx, tx, organizationID, flowID)
	if err != nil {
		return Flow{}, err
	}
	now := time.Now()
	if row.ConsentStatus != string(Unopened) || row.ProcessStatus != string(Active) || !now.Before(row.ExpiresAt) {
		return m.toFlow(row)
	}
	row.ConsentStatus, row.OpenedAt = string(Opened), &now
	if err := store.SaveState(ctx, tx, &row); err != nil {
		return Flow{}, err
	}
	f, err := m.toFlow(row)
	if err != nil {
		return Flow{}, err
	}
	return f, m.publishTx(ctx, tx, f, webhooks.FlowOpened)
}

func orNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// lockedFlow reads an organization's flow, locked for update in tx. ErrNotFound.
func lockedFlow(ctx context.Context, tx database.Tx, organizationID, flowID string) (store.Flow, error) {
	return lockedFlowIfMatch(ctx, tx, organizationID, flowID, etag.Any)
}

// lockedFlowIfMatch is lockedFlow for a write of the API: it checks cond
// against the flow's ETag under the lock, so that no other change comes
// between the check and the write. ErrNotFound, apperr PreconditionFailed.
func lockedFlowIfMatch(ctx context.Context, tx database.Tx, organizationID, flowID string, cond etag.IfMatch) (store.Flow, error) {
	if !ids.Valid(flowID) || organizationID == "" {
		return store.Flow{}, ErrNotFound
	}
	row, err := store.GetFlow(ctx, tx, organizationID, flowID, true)
	if err != nil {
		return row, notFound(err)
	}
	return row, cond.Check(Flow{Version: row.Version}.ETag())
}

// ExpireDue cancels up to limit active flows whose consent expired by now
// (flow.cancelled) and returns how many it cancelled. A flow another
// transaction holds is left to it.
func (m *Manager) ExpireDue(ctx context.Context, now time.Time, limit int) (int, error) {
	due, err := store.DueForExpiry(ctx, m.pool, now, limit)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	n := 0
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		for _, k := range due {
			row, err := store.LockDueForExpiry(ctx, tx, k, now)
			if errors.Is(err, database.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if _, err := m.cancelTx(ctx, tx, row); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
