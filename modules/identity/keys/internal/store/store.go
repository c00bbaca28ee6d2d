// Package store is the SQL of the signing keys: the signing_keys table. Its
// functions take a querier (a pool or a transaction) so that the caller
// decides the unit of work.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// SigningKey is a row of signing_keys.
type SigningKey struct {
	ID        string
	Purpose   string // "token" or "receipt"
	Algorithm string
	PublicJWK []byte
	Sealed    []byte
	CreatedAt time.Time
	RetiredAt *time.Time
}

// ActiveSigningKey returns the key of purpose and algorithm that signs now, or database.ErrNotFound.
func ActiveSigningKey(ctx context.Context, q database.Querier, purpose, algorithm string) (SigningKey, error) {
	var k SigningKey
	err := q.QueryRow(ctx, `select id, purpose, algorithm, public_jwk, private_key_sealed, created_at, retired_at
		from signing_keys where retired_at is null and purpose = $1 and algorithm = $2`, purpose, algorithm).
		Scan(&k.ID, &k.Purpose, &k.Algorithm, &k.PublicJWK, &k.Sealed, &k.CreatedAt, &k.RetiredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, database.ErrNotFound
	}
	return k, err
}

// PublishedKeys returns the active keys, the token keys retired less than
// tokenGrace ago and the receipt keys retired less than receiptGrace ago,
// newest first.
func PublishedKeys(ctx context.Context, q database.Querier, tokenGrace, receiptGrace time.Duration) ([]SigningKey, error) {
	rows, err := q.Query(ctx, `select id, purpose, algorithm, public_jwk, created_at, retired_at from signing_keys
		where retired_at is null
		   or retired_at > now() - make_interval(secs => case purpose when 'receipt' then $2::float8 else $1::float8 end)
		order by created_at desc, purpose desc, algorithm`, tokenGrace.Seconds(), receiptGrace.Seconds())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SigningKey, error) {
		var k SigningKey
		err := r.Scan(&k.ID, &k.Purpose, &k.Algorithm, &k.PublicJWK, &k.CreatedAt, &k.RetiredAt)
		return k, err
	})
}

// LockSigningKeys serializes key creation and rotation across instances.
func LockSigningKeys(ctx context.Context, q database.Querier) error {
	_, err := q.Exec(ctx, "select pg_advisory_xact_lock(7230164003)")
	return err
}

// RetireActiveKey retires the key of purpose and algorithm that signs now, if any.
func RetireActiveKey(ctx context.Context, q database.Querier, purpose, algorithm string) error {
	_, err := q.Exec(ctx, "update signing_keys set retired_at = now() where retired_at is null and purpose = $1 and algorithm = $2",
		purpose, algorithm)
	return err
}

// InsertSigningKey stores a new active key of its purpose and algorithm.
func InsertSigningKey(ctx context.Context, q database.Querier, k SigningKey) error {
	_, err := q.Exec(ctx, `insert into signing_keys (id, purpose, algorithm, public_jwk, private_key_sealed) values ($1, $2, $3, $4, $5)`,
		k.ID, k.Purpose, k.Algorithm, k.PublicJWK, k.Sealed)
	return err
}
