package identity

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/internal/store"
)

// SetClientDPoP implements Clients. The token endpoint reads the client's
// row on every request, so the change holds from its commit on; the
// notification keeps the other instances' view of the client current.
func (m *Module) SetClientDPoP(ctx context.Context, organizationID, clientID string, on bool, before ...database.BeforeCommit[ClientChange]) (Client, error) {
	var change ClientChange
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		prev, err := store.GetClient(ctx, tx, clientID)
		if err != nil {
			return err
		}
		row, err := store.SetClientDPoPBound(ctx, tx, organizationID, clientID, on)
		if err != nil {
			return err
		}
		change = ClientChange{Before: toClient(prev), After: toClient(row)}
		if err := store.Notify(ctx, tx, "client:"+clientID); err != nil {
			return err
		}
		if change.Before.DPoPBound == change.After.DPoPBound {
			return nil // nothing changed: nothing to record
		}
		return database.RunBeforeCommit(ctx, tx, change, before)
	})
	if errors.Is(err, store.ErrNotFound) {
		return Client{}, ErrClientNotFound
	}
	if err != nil {
		return Client{}, database.Classify(err)
	}
	m.states.invalidate("client:" + clientID)
	return change.After, nil
}
