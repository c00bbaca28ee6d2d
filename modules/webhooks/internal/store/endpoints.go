package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Endpoint is a row of webhook_endpoints.
type Endpoint struct {
	OrganizationID string
	ID             string
	URL            string
	Description    string
	EventTypes     []string
	Enabled        bool
	DisabledReason *string
	FailingSince   *time.Time
	// DisabledAt is when the endpoint was disabled; nil while it is enabled.
	DisabledAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Version grows with every change of the row: each statement that
	// updates webhook_endpoints sets version = version + 1.
	Version int
	// Signing is symmetric or asymmetric, Payload full or thin;
	// SigningChangedAt is when Signing last changed (nil: never).
	Signing, Payload string
	SigningChangedAt *time.Time
	// Ordering is 'none' or 'per-flow'.
	Ordering string
	// RateLimit is the most deliveries a second; nil for no limit.
	RateLimit *int
}

const endpointColumns = `organization_id, id::text, url, description, event_types, enabled, disabled_reason,
	failing_since, disabled_at, created_at, updated_at, version, signing, payload, signing_changed_at, ordering, rate_limit`

func scanEndpoint(row pgx.Row) (Endpoint, error) {
	var e Endpoint
	err := row.Scan(&e.OrganizationID, &e.ID, &e.URL, &e.Description, &e.EventTypes, &e.Enabled, &e.DisabledReason,
		&e.FailingSince, &e.DisabledAt, &e.CreatedAt, &e.UpdatedAt, &e.Version, &e.Signing, &e.Payload, &e.SigningChangedAt,
		&e.Ordering, &e.RateLimit)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, database.ErrNotFound
	}
	return e, err
}

func collectEndpoints(rows pgx.Rows, err error) ([]Endpoint, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Endpoint
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// LockEndpoints holds, until tx ends, the organization's right to add
// endpoints, so that two creates cannot both pass the count under the cap.
func LockEndpoints(ctx context.Context, tx database.Querier, organizationID string) error {
	_, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || $1, 0))`, organizationID)
	return err
}

// CountEndpoints counts the organization's endpoints.
func CountEndpoints(ctx context.Context, db database.Querier, organizationID string) (int, error) {
	var n int
	err := db.QueryRow(ctx, `select count(*) from webhook_endpoints where organization_id = $1`, organizationID).Scan(&n)
	return n, err
}

// InsertEndpoint stores a new endpoint and returns it as stored; one
// stored disabled is disabled from its creation.
func InsertEndpoint(ctx context.Context, db database.Querier, e Endpoint) (Endpoint, error) {
	return scanEndpoint(db.QueryRow(ctx, `
		insert into webhook_endpoints (organization_id, id, url, description, event_types, enabled, disabled_at, signing, payload,
			ordering, rate_limit)
		values ($1, $2, $3, $4, $5, $6, `+disabledAt(e.Enabled, true, "null")+`, $7, $8, $9, $10)
		returning `+endpointColumns,
		e.OrganizationID, e.ID, e.URL, e.Description, e.EventTypes, e.Enabled, e.Signing, e.Payload, e.Ordering, e.RateLimit))
}

// disabledAt is the SQL of an endpoint's disabled_at once it is enabled or
// not: null when enabled, the transaction's time when it was enabled
// before, kept as it was (was) otherwise. The choice is made here and not
// in SQL, as Citus refuses now() in a CASE of a write.
func disabledAt(enabled, wasEnabled bool, was string) string {
	switch {
	case enabled:
		return "null"
	case wasEnabled:
		return "now()"
	}
	return was
}

// GetEndpoint returns one endpoint, its row locked until tx ends when
// forUpdate. database.ErrNotFound.
func GetEndpoint(ctx context.Context, db database.Querier, organizationID, id string, forUpdate bool) (Endpoint, error) {
	q := `select ` + endpointColumns + ` from webhook_endpoints where organization_id = $1 and id = $2`
	if forUpdate {
		q += ` for update`
	}
	return scanEndpoint(db.QueryRow(ctx, q, organizationID, id))
}

// ListEndpoints returns up to limit of the organization's endpoints by
// creation, newest first when desc.
func ListEndpoints(ctx context.Context, db database.Querier, organizationID string, desc bool, limit int) ([]Endpoint, error) {
	order := `created_at, id`
	if desc {
		order = `created_at desc, id desc`
	}
	return collectEndpoints(db.Query(ctx, `select `+endpointColumns+` from webhook_endpoints
		where organization_id = $1 order by `+order+` limit $2`, organizationID, limit))
}

// UpdateEndpoint writes an endpoint's changeable columns and returns it as
// stored; wasEnabled is whether it was enabled before, which decides its
// disabled_at. database.ErrNotFound.
func UpdateEndpoint(ctx context.Context, db database.Querier, e Endpoint, wasEnabled bool) (Endpoint, error) {
	return scanEndpoint(db.QueryRow(ctx, `
		update webhook_endpoints set url = $3, description = $4, event_types = $5, enabled = $6,
			disabled_reason = $7, failing_since = $8, updated_at = now(), version = version + 1,
			disabled_at = `+disabledAt(e.Enabled, wasEnabled, "disabled_at")+`,
			signing = $9, payload = $10, signing_changed_at = $11, ordering = $12, rate_limit = $13
		where organization_id = $1 and id = $2
		returning `+endpointColumns,
		e.OrganizationID, e.ID, e.URL, e.Description, e.EventTypes, e.Enabled, e.DisabledReason, e.FailingSince,
		e.Signing, e.Payload, e.SigningChangedAt, e.Ordering, e.RateLimit))
}

// DeleteEndpoint removes an endpoint and returns it as it was. database.ErrNotFound.
func DeleteEndpoint(ctx context.Context, db database.Querier, organizationID, id string) (Endpoint, error) {
	return scanEndpoint(db.QueryRow(ctx, `delete from webhook_endpoints where organization_id = $1 and id = $2
		returning `+endpointColumns, organizationID, id))
}

// MatchingEndpoints returns the organization's enabled endpoints that take
// events of type eventType (those naming no type take every one), oldest first.
func MatchingEndpoints(ctx context.Context, db database.Querier, organizationID, eventType string) ([]Endpoint, error) {
	return collectEndpoints(db.Query(ctx, `select `+endpointColumns+` from webhook_endpoints
		where organization_id = $1 and enabled and (cardinality(event_types) = 0 or $2 = any (event_types))
		order by created_at, id`, organizationID, eventType))
}

// DisableFailing disables an enabled endpoint that has failed for at least
// after, with reason, and returns it. The row's own condition decides, so
// that of instances racing to disable it one does. database.ErrNotFound when it is
// not due: disabled already, healthy again, or gone.
func DisableFailing(ctx context.Context, db database.Querier, organizationID, id string, after time.Duration, reason string) (Endpoint, error) {
	return scanEndpoint(db.QueryRow(ctx, `
		update webhook_endpoints set enabled = false, disabled_reason = $4, disabled_at = now(), updated_at = now(),
			version = version + 1
		where organization_id = $1 and id = $2 and enabled and failing_since <= now() - make_interval(secs => $3)
		returning `+endpointColumns, organizationID, id, after.Seconds(), reason))
}

// FailPendingDeliveries marks the endpoint's pending deliveries failed with
// lastError and returns how many it marked.
func FailPendingDeliveries(ctx context.Context, db database.Querier, organizationID, endpointID, lastError string) (int64, error) {
	tag, err := db.Exec(ctx, `
		update webhook_events set state = 'failed', last_error = $3, finished_at = now()
		where organization_id = $1 and endpoint_id = $2 and state = 'pending'`, organizationID, endpointID, lastError)
	return tag.RowsAffected(), err
}

// DisabledEndpoints returns the organization's endpoints flowd disabled,
// oldest first.
func DisabledEndpoints(ctx context.Context, db database.Querier, organizationID string) ([]Endpoint, error) {
	return collectEndpoints(db.Query(ctx, `select `+endpointColumns+` from webhook_endpoints
		where organization_id = $1 and disabled_reason is not null
		order by created_at, id`, organizationID))
}
