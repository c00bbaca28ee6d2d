package identity

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/internal/store"
)

// SetClientRateLimit implements Clients. Bearer verification reads the limit
// with the client's state, which every instance caches until the change's
// notification drops it.
func (m *Module) SetClientRateLimit(ctx context.Context, organizationID, clientID string, limit RateLimit, before ...database.BeforeCommit[ClientChange]) (Client, error) {
	if err := limit.Validate(); err != nil {
		return Client{}, err
	}
	var change ClientChange
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		prev, err := store.GetClient(ctx, tx, clientID)
		if err != nil {
			return err
		}
		row, err := store.SetClientRateLimit(ctx, tx, organizationID, clientID, limit.column())
		if err != nil {
			return err
		}
		change = ClientChange{Before: toClient(prev), After: toClient(row)}
		if change.Before.RateLimit == change.After.RateLimit {
			return nil // nothing changed: nothing to announce or record
		}
		if err := store.Notify(ctx, tx, "client:"+clientID); err != nil {
			return err
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

// SetExternalClientRateLimit implements Clients.
func (m *Module) SetExternalClientRateLimit(ctx context.Context, issuer, clientID string, limit RateLimit, before ...database.BeforeCommit[ExternalClient]) (ExternalClient, error) {
	if err := limit.Validate(); err != nil {
		return ExternalClient{}, err
	}
	var row store.ExternalClient
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		var err error
		// Mappings are stored with the issuer as MapExternalClient trims it.
		row, err = store.SetExternalClientRateLimit(ctx, tx, strings.TrimRight(strings.TrimSpace(issuer), "/"), clientID, limit.column())
		if err != nil {
			return err
		}
		if err := store.Notify(ctx, tx, "external"); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, toExternal(row), before)
	})
	if errors.Is(err, store.ErrNotFound) {
		return ExternalClient{}, ErrClientNotFound
	}
	if err != nil {
		return ExternalClient{}, database.Classify(err)
	}
	m.states.invalidateAll()
	return toExternal(row), nil
}

// toRateLimit reads the api_rate_limit column: null is the default.
func toRateLimit(perMinute *int) RateLimit {
	if perMinute == nil {
		return RateLimit{}
	}
	return RateLimit{Own: true, PerMinute: *perMinute}
}

// column is r as the api_rate_limit column holds it.
func (r RateLimit) column() *int {
	if !r.Own {
		return nil
	}
	return &r.PerMinute
}
