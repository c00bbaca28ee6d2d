// Package store is the SQL of the token service: the refresh_tokens,
// revoked_access_tokens, client_assertion_jtis and dpop_proofs tables. Its
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

// RefreshToken is a row of refresh_tokens.
type RefreshToken struct {
	Hash      []byte
	FamilyID  string
	ClientID  string
	Scopes    []string
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
	RevokedAt *time.Time
	// DPoPJKT is the thumbprint of the DPoP key the family is bound to; empty when unbound.
	DPoPJKT string
}

const refreshColumns = "token_hash, family_id::text, client_id, scopes, created_at, expires_at, used_at, revoked_at, coalesce(dpop_jkt, '')"

func scanRefreshToken(row pgx.Row) (RefreshToken, error) {
	var t RefreshToken
	err := row.Scan(&t.Hash, &t.FamilyID, &t.ClientID, &t.Scopes, &t.CreatedAt, &t.ExpiresAt, &t.UsedAt, &t.RevokedAt, &t.DPoPJKT)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, database.ErrNotFound
	}
	return t, err
}

// InsertRefreshToken stores a refresh token's hash.
func InsertRefreshToken(ctx context.Context, q database.Querier, t RefreshToken) error {
	_, err := q.Exec(ctx, `insert into refresh_tokens (token_hash, family_id, client_id, scopes, expires_at, dpop_jkt)
		values ($1, $2, $3, $4, $5, nullif($6, ''))`,
		t.Hash, t.FamilyID, t.ClientID, t.Scopes, t.ExpiresAt, t.DPoPJKT)
	return err
}

// LockRefreshToken reads a refresh token for update.
func LockRefreshToken(ctx context.Context, q database.Querier, hash []byte) (RefreshToken, error) {
	return scanRefreshToken(q.QueryRow(ctx, "select "+refreshColumns+" from refresh_tokens where token_hash = $1 for update", hash))
}

// GetRefreshToken reads a refresh token.
func GetRefreshToken(ctx context.Context, q database.Querier, hash []byte) (RefreshToken, error) {
	return scanRefreshToken(q.QueryRow(ctx, "select "+refreshColumns+" from refresh_tokens where token_hash = $1", hash))
}

// MarkRefreshTokenUsed records the one use of a refresh token.
func MarkRefreshTokenUsed(ctx context.Context, q database.Querier, hash []byte) error {
	_, err := q.Exec(ctx, "update refresh_tokens set used_at = now() where token_hash = $1", hash)
	return err
}

// RevokeFamily revokes every refresh token of a family and returns how many
// were not revoked before.
func RevokeFamily(ctx context.Context, q database.Querier, familyID string) (int64, error) {
	tag, err := q.Exec(ctx, "update refresh_tokens set revoked_at = now() where family_id = $1 and revoked_at is null", familyID)
	return tag.RowsAffected(), err
}

// RevokeClientRefreshTokens revokes every refresh token of a client that
// is not revoked yet.
func RevokeClientRefreshTokens(ctx context.Context, q database.Querier, clientID string) error {
	_, err := q.Exec(ctx, "update refresh_tokens set revoked_at = now() where client_id = $1 and revoked_at is null", clientID)
	return err
}

// DeleteExpiredRefreshTokens removes refresh tokens expired for a day, a batch at a time.
func DeleteExpiredRefreshTokens(ctx context.Context, q database.Querier) (int64, error) {
	tag, err := q.Exec(ctx, `delete from refresh_tokens where token_hash in (
		select token_hash from refresh_tokens where expires_at < now() - interval '1 day' limit 1000)`)
	return tag.RowsAffected(), err
}

// RevokedAccessToken is a row of revoked_access_tokens.
type RevokedAccessToken struct {
	JTI       string
	ExpiresAt time.Time
}

// RevokeAccessToken records the revocation of a client's access token and
// reports whether it was not recorded before.
func RevokeAccessToken(ctx context.Context, q database.Querier, jti, clientID string, expiresAt time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `insert into revoked_access_tokens (jti, client_id, expires_at) values ($1, $2, $3)
		on conflict (jti) do nothing`, jti, clientID, expiresAt)
	return tag.RowsAffected() == 1, err
}

// AccessTokenRevoked reports whether the access token of jti was revoked.
func AccessTokenRevoked(ctx context.Context, q database.Querier, jti string) (bool, error) {
	var revoked bool
	err := q.QueryRow(ctx, "select exists (select from revoked_access_tokens where jti = $1)", jti).Scan(&revoked)
	return revoked, err
}

// RevokedAccessTokens returns every revoked access token that has not
// expired, at most limit of them.
func RevokedAccessTokens(ctx context.Context, q database.Querier, limit int) ([]RevokedAccessToken, error) {
	rows, err := q.Query(ctx, "select jti, expires_at from revoked_access_tokens where expires_at > now() limit $1", limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (RevokedAccessToken, error) {
		var t RevokedAccessToken
		err := r.Scan(&t.JTI, &t.ExpiresAt)
		return t, err
	})
}

// DeleteExpiredRevokedAccessTokens forgets revocations of access tokens
// expired for a minute (clock skew between instances), a batch at a time.
func DeleteExpiredRevokedAccessTokens(ctx context.Context, q database.Querier) (int64, error) {
	tag, err := q.Exec(ctx, `delete from revoked_access_tokens where jti in (
		select jti from revoked_access_tokens where expires_at < now() - interval '1 minute' limit 1000)`)
	return tag.RowsAffected(), err
}

// UseAssertionJTI records that a client assertion of jti was accepted and
// reports whether it was not recorded before.
func UseAssertionJTI(ctx context.Context, q database.Querier, clientID, jti string, expiresAt time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `insert into client_assertion_jtis (client_id, jti, expires_at) values ($1, $2, $3)
		on conflict (client_id, jti) do nothing`, clientID, jti, expiresAt)
	return tag.RowsAffected() == 1, err
}

// DeleteExpiredAssertionJTIs forgets the jti of assertions expired for a
// minute (clock skew between instances), a batch at a time.
func DeleteExpiredAssertionJTIs(ctx context.Context, q database.Querier) (int64, error) {
	tag, err := q.Exec(ctx, `delete from client_assertion_jtis where (client_id, jti) in (
		select client_id, jti from client_assertion_jtis where expires_at < now() - interval '1 minute' limit 1000)`)
	return tag.RowsAffected(), err
}

// SpendDPoPProof records a DPoP proof's jti for its key and reports whether
// it was not recorded before: false means the proof is a replay.
func SpendDPoPProof(ctx context.Context, q database.Querier, jkt, jti string, expiresAt time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `insert into dpop_proofs (jkt, jti, expires_at) values ($1, $2, $3)
		on conflict (jkt, jti) do nothing`, jkt, jti, expiresAt)
	return tag.RowsAffected() == 1, err
}

// DeleteExpiredDPoPProofs forgets proofs expired for a minute (clock skew
// between instances), a batch at a time.
func DeleteExpiredDPoPProofs(ctx context.Context, q database.Querier) (int64, error) {
	tag, err := q.Exec(ctx, `delete from dpop_proofs where (jkt, jti) in (
		select jkt, jti from dpop_proofs where expires_at < now() - interval '1 minute' limit 1000)`)
	return tag.RowsAffected(), err
}
