package store

import (
	"context"
	"time"
)

// SpendDPoPProof records a DPoP proof's jti for its key and reports whether
// it was not recorded before: false means the proof is a replay.
func SpendDPoPProof(ctx context.Context, q Querier, jkt, jti string, expiresAt time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `insert into dpop_proofs (jkt, jti, expires_at) values ($1, $2, $3)
		on conflict (jkt, jti) do nothing`, jkt, jti, expiresAt)
	return tag.RowsAffected() == 1, err
}

// DeleteExpiredDPoPProofs forgets proofs expired for a minute (clock skew
// between instances), a batch at a time.
func DeleteExpiredDPoPProofs(ctx context.Context, q Querier) (int64, error) {
	tag, err := q.Exec(ctx, `delete from dpop_proofs where (jkt, jti) in (
		select jkt, jti from dpop_proofs where expires_at < now() - interval '1 minute' limit 1000)`)
	return tag.RowsAffected(), err
}

// SetClientDPoPBound sets an active client's dpop_bound_access_tokens.
func SetClientDPoPBound(ctx context.Context, q Querier, organizationID, id string, on bool) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, ErrNotFound
	}
	return scanClient(q.QueryRow(ctx, `update api_clients set dpop_bound_access_tokens = $3
		where id = $1 and organization_id = $2 and revoked_at is null returning `+clientColumns, id, organizationID, on))
}
