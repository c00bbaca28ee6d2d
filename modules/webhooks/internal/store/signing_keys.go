package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// SigningKey is one of an organization's ed25519 key pairs: the private
// key as stored (sealed or not), the public key "whpk_<base64>".
type SigningKey struct {
	Private, Public, ID string
	// Expires is when a previous key stops signing; zero for the current one.
	Expires time.Time
}

// SigningKeys are an organization's key pairs that sign now: the current
// one first, then the previous one until its overlap ends.
type SigningKeys struct {
	Keys      []SigningKey
	CreatedAt time.Time // of the current key
}

// GetSigningKeys returns an organization's signing keys; a previous key
// past its expiry is left out. database.ErrNotFound.
func GetSigningKeys(ctx context.Context, db database.Querier, organizationID string) (SigningKeys, error) {
	var cur SigningKey
	var s SigningKeys
	var prevPriv, prevPub, prevID *string
	var prevExp *time.Time
	err := db.QueryRow(ctx, `
		select private_key, public_key, key_id, created_at,
			case when previous_expires_at > now() then previous_private_key end,
			case when previous_expires_at > now() then previous_public_key end,
			case when previous_expires_at > now() then previous_key_id end,
			case when previous_expires_at > now() then previous_expires_at end
		from webhook_signing_keys where organization_id = $1`, organizationID).
		Scan(&cur.Private, &cur.Public, &cur.ID, &s.CreatedAt, &prevPriv, &prevPub, &prevID, &prevExp)
	if errors.Is(err, pgx.ErrNoRows) {
		return SigningKeys{}, database.ErrNotFound
	}
	if err != nil {
		return SigningKeys{}, err
	}
	s.Keys = []SigningKey{cur}
	if prevPriv != nil && prevPub != nil && prevID != nil && prevExp != nil {
		s.Keys = append(s.Keys, SigningKey{Private: *prevPriv, Public: *prevPub, ID: *prevID, Expires: *prevExp})
	}
	return s, nil
}

// InsertSigningKey stores an organization's first key pair; when it has
// one already, that one is kept. It returns the keys in force.
func InsertSigningKey(ctx context.Context, db database.Querier, organizationID string, k SigningKey) (SigningKeys, error) {
	if _, err := db.Exec(ctx, `
		insert into webhook_signing_keys (organization_id, private_key, public_key, key_id) values ($1, $2, $3, $4)
		on conflict (organization_id) do nothing`, organizationID, k.Private, k.Public, k.ID); err != nil {
		return SigningKeys{}, err
	}
	return GetSigningKeys(ctx, db, organizationID)
}

// RotateSigningKey makes k the organization's current key pair; the
// current one keeps signing for overlap. database.ErrNotFound when it has none.
func RotateSigningKey(ctx context.Context, db database.Querier, organizationID string, k SigningKey, overlap time.Duration) error {
	tag, err := db.Exec(ctx, `
		update webhook_signing_keys set
			previous_private_key = private_key,
			previous_public_key = public_key,
			previous_key_id = key_id,
			previous_expires_at = now() + make_interval(secs => $5),
			private_key = $2, public_key = $3, key_id = $4,
			created_at = now()
		where organization_id = $1`, organizationID, k.Private, k.Public, k.ID, overlap.Seconds())
	if err == nil && tag.RowsAffected() == 0 {
		return database.ErrNotFound
	}
	return err
}
