package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// EndpointStore implements Endpoints on PostgreSQL.
type EndpointStore struct {
	pool  *pgxpool.Pool
	rules EndpointRules
}

var _ Endpoints = (*EndpointStore)(nil)

// NewEndpoints returns the endpoint registry on pool, holding URLs to rules.
func NewEndpoints(pool *pgxpool.Pool, rules EndpointRules) *EndpointStore {
	return &EndpointStore{pool: pool, rules: rules}
}

func fromEndpointRow(r store.Endpoint) Endpoint {
	e := Endpoint{ID: r.ID, OrganizationID: r.OrganizationID, URL: r.URL, Description: r.Description,
		EventTypes: make([]EventType, len(r.EventTypes)), Enabled: r.Enabled, FailingSince: r.FailingSince,
		DisabledAt: r.DisabledAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version,
		Signing: Signing(r.Signing), Payload: Payload(r.Payload), SigningChangedAt: r.SigningChangedAt, Ordering: Ordering(r.Ordering)}
	if r.RateLimit != nil {
		e.RateLimit = *r.RateLimit
	}
	for i, t := range r.EventTypes {
		e.EventTypes[i] = EventType(t)
	}
	if r.DisabledReason != nil {
		e.DisabledReason = *r.DisabledReason
	}
	return e
}

func toEndpointRow(e Endpoint) store.Endpoint {
	r := store.Endpoint{OrganizationID: e.OrganizationID, ID: e.ID, URL: e.URL, Description: e.Description,
		EventTypes: make([]string, len(e.EventTypes)), Enabled: e.Enabled, FailingSince: e.FailingSince,
		Signing: string(e.Signing), Payload: string(e.Payload), SigningChangedAt: e.SigningChangedAt, Ordering: string(e.Ordering)}
	if r.Ordering == "" {
		r.Ordering = string(Unordered)
	}
	if e.RateLimit > 0 {
		r.RateLimit = &e.RateLimit
	}
	for i, t := range e.EventTypes {
		r.EventTypes[i] = string(t)
	}
	if e.DisabledReason != "" {
		r.DisabledReason = &e.DisabledReason
	}
	return r
}

// endpointNotFound maps the store's ErrNotFound to ErrEndpointNotFound.
func endpointNotFound(err error) error {
	if errors.Is(err, database.ErrNotFound) {
		return ErrEndpointNotFound
	}
	return database.Classify(err)
}

// validEndpointID reports whether id can name an endpoint (a UUID), so that
// a malformed one is not found rather than a failed query.
func validEndpointID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

// Create implements Endpoints. The organization's endpoints are counted
// under a lock of its own, so that concurrent creates cannot pass the cap.
func (s *EndpointStore) Create(ctx context.Context, organizationID string, n NewEndpoint, before ...database.BeforeCommit[Endpoint]) (Endpoint, error) {
	if err := n.Validate(s.rules); err != nil {
		return Endpoint{}, err
	}
	n = n.Normalize()
	id, err := uuid.NewV7()
	if err != nil {
		return Endpoint{}, fmt.Errorf("webhooks: endpoint id: %w", err)
	}
	var out Endpoint
	err = database.WithTx(ctx, s.pool, func(tx database.Tx) error {
		if err := store.LockEndpoints(ctx, tx, organizationID); err != nil {
			return err
		}
		count, err := store.CountEndpoints(ctx, tx, organizationID)
		if err != nil {
			return err
		}
		if count >= MaxEndpoints {
			return apperr.New(apperr.Conflict, "The organization has %d webhook endpoints, the most it may have; delete one first.", MaxEndpoints)
		}
		row, err := store.InsertEndpoint(ctx, tx, toEndpointRow(Endpoint{ID: id.String(), OrganizationID: organizationID,
			URL: n.URL, Description: n.Description, EventTypes: n.EventTypes, Enabled: n.Enabled,
			Signing: n.Signing, Payload: n.Payload, Ordering: n.Ordering, RateLimit: n.RateLimit}))
		if err != nil {
			return err
		}
		out = fromEndpointRow(row)
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil {
		return Endpoint{}, database.Classify(err)
	}
	return out, nil
}

// Get implements Endpoints.
func (s *EndpointStore) Get(ctx context.Context, organizationID, id string) (Endpoint, error) {
	if !validEndpointID(id) {
		return Endpoint{}, ErrEndpointNotFound
	}
	row, err := store.GetEndpoint(ctx, s.pool, organizationID, id, false)
	if err != nil {
		return Endpoint{}, endpointNotFound(err)
	}
	return fromEndpointRow(row), nil
}

// fromEndpointRows converts stored endpoints.
func fromEndpointRows(rows []store.Endpoint) []Endpoint {
	out := make([]Endpoint, len(rows))
	for i, r := range rows {
		out[i] = fromEndpointRow(r)
	}
	return out
}

// List implements Endpoints.
func (s *EndpointStore) List(ctx context.Context, organizationID string, order EndpointOrder) ([]Endpoint, error) {
	rows, err := store.ListEndpoints(ctx, s.pool, organizationID, order == NewestFirst, MaxEndpoints)
	if err != nil {
		return nil, database.Classify(err)
	}
	return fromEndpointRows(rows), nil
}

// Update implements Endpoints. The endpoint's row is held while it changes,
// so that two updates apply one after the other.
func (s *EndpointStore) Update(ctx context.Context, organizationID, id string, u EndpointUpdate, cond etag.IfMatch, before ...database.BeforeCommit[EndpointChange]) (Endpoint, error) {
	if !validEndpointID(id) {
		return Endpoint{}, ErrEndpointNotFound
	}
	if err := u.Validate(s.rules); err != nil {
		return Endpoint{}, err
	}
	var out Endpoint
	err := database.WithTx(ctx, s.pool, func(tx database.Tx) error {
		row, err := store.GetEndpoint(ctx, tx, organizationID, id, true)
		if err != nil {
			return endpointNotFound(err)
		}
		was := fromEndpointRow(row)
		if err := cond.Check(was.ETag()); err != nil {
			return err
		}
		after := u.apply(was)
		if after.Signing != was.Signing {
			now := time.Now()
			after.SigningChangedAt = &now
		}
		row, err = store.UpdateEndpoint(ctx, tx, toEndpointRow(after), was.Enabled)
		if err != nil {
			return endpointNotFound(err)
		}
		out = fromEndpointRow(row)
		if was.Ordering == PerFlow && out.Ordering != PerFlow {
			// The deliveries held in order would sleep on until HeldRecheck.
			if err := store.ReleaseHeld(ctx, tx, organizationID, id); err != nil {
				return err
			}
		}
		return database.RunBeforeCommit(ctx, tx, EndpointChange{Before: was, After: out}, before)
	})
	if err != nil {
		return Endpoint{}, database.Classify(err)
	}
	return out, nil
}

// Delete implements Endpoints. The endpoint's row is held from the check of
// cond to the delete.
func (s *EndpointStore) Delete(ctx context.Context, organizationID, id string, cond etag.IfMatch, before ...database.BeforeCommit[Endpoint]) (Endpoint, error) {
	if !validEndpointID(id) {
		return Endpoint{}, ErrEndpointNotFound
	}
	var out Endpoint
	err := database.WithTx(ctx, s.pool, func(tx database.Tx) error {
		row, err := store.GetEndpoint(ctx, tx, organizationID, id, true)
		if err != nil {
			return endpointNotFound(err)
		}
		if err := cond.Check(fromEndpointRow(row).ETag()); err != nil {
			return err
		}
		row, err = store.DeleteEndpoint(ctx, tx, organizationID, id)
		if err != nil {
			return endpointNotFound(err)
		}
		out = fromEndpointRow(row)
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil {
		return Endpoint{}, database.Classify(err)
	}
	return out, nil
}

// Disabled implements Endpoints.
func (s *EndpointStore) Disabled(ctx context.Context, organizationID string) ([]Endpoint, error) {
	rows, err := store.DisabledEndpoints(ctx, s.pool, organizationID)
	if err != nil {
		return nil, database.Classify(err)
	}
	return fromEndpointRows(rows), nil
}

// MatchingTx implements Endpoints.
func (s *EndpointStore) MatchingTx(ctx context.Context, tx database.Tx, organizationID string, t EventType) ([]Endpoint, error) {
	return matchingEndpointsTx(ctx, tx, organizationID, t)
}

// matchingEndpointsTx is MatchingTx for the module's own fan-out, which
// reads the registry in the publishing transaction without an EndpointStore.
func matchingEndpointsTx(ctx context.Context, tx database.Tx, organizationID string, t EventType) ([]Endpoint, error) {
	rows, err := store.MatchingEndpoints(ctx, tx, organizationID, string(t))
	if err != nil {
		return nil, database.Classify(err)
	}
	out := make([]Endpoint, len(rows))
	for i, r := range rows {
		out[i] = fromEndpointRow(r)
	}
	return out, nil
}
