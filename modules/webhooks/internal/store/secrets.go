package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Secrets are an organization's signing secrets.
type Secrets struct {
	Current         string
	CreatedAt       time.Time
	Previous        string // empty when none signs any more
	PreviousExpires time.Time
}

// GetSecrets returns an organization's secrets; a previous secret past its
// expiry is left out. database.ErrNotFound.
func GetSecrets(ctx context.Context, db database.Querier, organizationID string) (Secrets, error) {
	var s Secrets
	var prev *string
	var prevExp *time.Time
	err := db.QueryRow(ctx, `
		select secret, created_at,
			case when previous_expires_at > now() then previous_secret end,
			case when previous_expires_at > now() then previous_expires_at end
		from webhook_secrets where organization_id = $1`, organizationID).
		Scan(&s.Current, &s.CreatedAt, &prev, &prevExp)
	if errors.Is(err, pgx.ErrNoRows) {
		return Secrets{}, database.ErrNotFound
	}
	if prev != nil && prevExp != nil {
		s.Previous, s.PreviousExpires = *prev, *prevExp
	}
	return s, err
}

// InsertSecret stores an organization's first secret; when it already has one,
// that one is kept. It returns the secret in force.
func InsertSecret(ctx context.Context, db database.Querier, organizationID, secret string) (Secrets, error) {
	if _, err := db.Exec(ctx, `
		insert into webhook_secrets (organization_id, secret) values ($1, $2)
		on conflict (organization_id) do nothing`, organizationID, secret); err != nil {
		return Secrets{}, err
	}
	return GetSecrets(ctx, db, organizationID)
}

// RotateSecret makes secret the organization's current one; the current one
// keeps signing for overlap. database.ErrNotFound when the organization has none.
func RotateSecret(ctx context.Context, db database.Querier, organizationID, secret string, overlap time.Duration) (time.Time, error) {
	var createdAt time.Time
	err := db.QueryRow(ctx, `
		update webhook_secrets set
			previous_secret = secret,
			previous_expires_at = now() + make_interval(secs => $3),
			secret = $2,
			created_at = now()
		where organization_id = $1
		returning created_at`, organizationID, secret, overlap.Seconds()).Scan(&createdAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, database.ErrNotFound
	}
	return createdAt, err
}
