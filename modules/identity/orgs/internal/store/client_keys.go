package store

import (
	"context"

	"github.com/flowd/flowd/internal/database"
)

// SetClientKeys replaces an active client's public keys (jwks or jwksURI,
// one of them) and keeps its secret, if any.
func SetClientKeys(ctx context.Context, q database.Querier, organizationID, id string, jwks []byte, jwksURI string) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, database.ErrNotFound
	}
	return scanClient(q.QueryRow(ctx, `update api_clients set jwks = $3, jwks_uri = nullif($4, ''), keys_replaced_at = now()
		where id = $1 and organization_id = $2 and revoked_at is null returning `+clientColumns, id, organizationID, jwks, jwksURI))
}
