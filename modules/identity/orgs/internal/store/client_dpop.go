package store

import (
	"context"

	"github.com/flowd/flowd/internal/database"
)

// SetClientDPoPBound sets an active client's dpop_bound_access_tokens.
func SetClientDPoPBound(ctx context.Context, q database.Querier, organizationID, id string, on bool) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, database.ErrNotFound
	}
	return scanClient(q.QueryRow(ctx, `update api_clients set dpop_bound_access_tokens = $3
		where id = $1 and organization_id = $2 and revoked_at is null returning `+clientColumns, id, organizationID, on))
}
