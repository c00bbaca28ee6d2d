package store

import (
	"context"
	"time"
)

// SetClientKeys replaces an active client's public keys (jwks or jwksURI,
// one of them) and keeps its secret, if any.
func SetClientKeys(ctx context.Context, q Querier, organizationID, id string, jwks []byte, jwksURI string) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, ErrNotFound
	}
	return scanClient(q.QueryRow(ctx, `update api_clients set jwks = $3, jwks_uri = nullif($4, ''), keys_replaced_at = now()
		where id = $1 and organization_id = $2 and revoked_at is null returning `+clientColumns, id, organizationID, jwks, jwksURI))
}

// UseAssertionJTI records that a client assertion of jti was accepted and
// reports whether it was not recorded before.
func UseAssertionJTI(ctx context.Context, q Querier, clientID, jti string, expiresAt time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `insert into client_assertion_jtis (client_id, jti, expires_at) values ($1, $2, $3)
		on conflict (client_id, jti) do nothing`, clientID, jti, expiresAt)
	return tag.RowsAffected() == 1, err
}

// DeleteExpiredAssertionJTIs forgets the jti of assertions expired for a
// minute (clock skew between instances), a batch at a time.
func DeleteExpiredAssertionJTIs(ctx context.Context, q Querier) (int64, error) {
	tag, err := q.Exec(ctx, `delete from client_assertion_jtis where (client_id, jti) in (
		select client_id, jti from client_assertion_jtis where expires_at < now() - interval '1 minute' limit 1000)`)
	return tag.RowsAffected(), err
}
