package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// SetClientRateLimit sets an active client's api_rate_limit; nil returns it
// to the default.
func SetClientRateLimit(ctx context.Context, q Querier, organizationID, id string, perMinute *int) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, ErrNotFound
	}
	return scanClient(q.QueryRow(ctx, `update api_clients set api_rate_limit = $3
		where id = $1 and organization_id = $2 and revoked_at is null returning `+clientColumns, id, organizationID, perMinute))
}

// SetExternalClientRateLimit sets a mapped external client's api_rate_limit;
// nil returns it to the default.
func SetExternalClientRateLimit(ctx context.Context, q Querier, issuer, clientID string, perMinute *int) (ExternalClient, error) {
	return scanExternal(q.QueryRow(ctx, `update external_clients set api_rate_limit = $3
		where issuer = $1 and client_id = $2 returning `+externalColumns, issuer, clientID, perMinute))
}

// APIRequests is what an instance counted of one client in one window, or,
// as AddAPIRequests returns it, the count of every instance together.
type APIRequests struct {
	ClientKey   string    `db:"client_key"`
	WindowStart time.Time `db:"window_start"`
	Requests    int64     `db:"requests"`
}

// AddAPIRequests adds each count to its client's window in one statement
// and returns the totals of those windows. A count of 0 adds nothing and
// only reads the total (an absent window is not returned). The rows are
// locked in the order given: callers sort them by key, so that two
// instances adding at once cannot deadlock.
func AddAPIRequests(ctx context.Context, q Querier, counts []APIRequests) ([]APIRequests, error) {
	keys := make([]string, len(counts))
	starts := make([]time.Time, len(counts))
	added := make([]int64, len(counts))
	for i, c := range counts {
		keys[i], starts[i], added[i] = c.ClientKey, c.WindowStart, c.Requests
	}
	rows, err := q.Query(ctx, `with counted as (
			select * from unnest($1::text[], $2::timestamptz[], $3::bigint[]) with ordinality as c(client_key, window_start, requests, n)
		), added as (
			insert into api_rate_windows as w (client_key, window_start, requests)
			select client_key, window_start, requests from counted where requests > 0 order by n
			on conflict (client_key, window_start) do update set requests = w.requests + excluded.requests
			returning w.client_key, w.window_start, w.requests
		)
		select client_key, window_start, requests from added
		union all
		select w.client_key, w.window_start, w.requests from api_rate_windows w
		join counted c on c.client_key = w.client_key and c.window_start = w.window_start and c.requests = 0`,
		keys, starts, added)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[APIRequests])
}

// DeleteAPIRateWindows deletes windows that started before before, a batch
// at a time.
func DeleteAPIRateWindows(ctx context.Context, q Querier, before time.Time) (int64, error) {
	tag, err := q.Exec(ctx, `delete from api_rate_windows where (client_key, window_start) in (
		select client_key, window_start from api_rate_windows where window_start < $1 limit 1000)`, before)
	return tag.RowsAffected(), err
}
