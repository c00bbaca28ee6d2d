package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// SetClientRateLimit sets an active client's api_rate_limit; nil returns it
// to the default.
func SetClientRateLimit(ctx context.Context, q database.Querier, organizationID, id string, perMinute *int) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, database.ErrNotFound
	}
	return scanClient(q.QueryRow(ctx, `update api_clients set api_rate_limit = $3
		where id = $1 and organization_id = $2 and revoked_at is null returning `+clientColumns, id, organizationID, perMinute))
}

// SetExternalClientRateLimit sets a mapped external client's api_rate_limit;
// nil returns it to the default.
func SetExternalClientRateLimit(ctx context.Context, q database.Querier, issuer, clientID string, perMinute *int) (ExternalClient, error) {
	return scanExternal(q.QueryRow(ctx, `update external_clients set api_rate_limit = $3
		where issuer = $1 and client_id = $2 returning `+externalColumns, issuer, clientID, perMinute))
}

// APIRequests is what an instance counted of one client in one window, or,
// as WriteAPIRequests returns it, the count of every instance together.
type APIRequests struct {
	ClientKey   string    `db:"client_key"`
	WindowStart time.Time `db:"window_start"`
	Requests    int64     `db:"requests"`
}

// WriteAPIRequests writes instance's count of each client's window, in one
// statement, and returns the windows' totals over every instance. A count
// only grows: writing one again, or an older one, changes nothing, so a
// statement whose answer was lost may be sent again. A count of 0 writes
// nothing and only reads the total (an absent window is not returned). Each
// instance writes rows of its own: instances never wait on each other.
func WriteAPIRequests(ctx context.Context, q database.Querier, instance string, counts []APIRequests) ([]APIRequests, error) {
	keys := make([]string, len(counts))
	starts := make([]time.Time, len(counts))
	requests := make([]int64, len(counts))
	for i, c := range counts {
		keys[i], starts[i], requests[i] = c.ClientKey, c.WindowStart, c.Requests
	}
	// The statement reads the table as it was before its own insert: the
	// other instances' rows, and this instance's from what the insert
	// returns.
	rows, err := q.Query(ctx, `with counted as (
			select * from unnest($1::text[], $2::timestamptz[], $3::bigint[]) as c(client_key, window_start, requests)
		), written as (
			insert into api_rate_windows as w (client_key, window_start, instance, requests)
			select client_key, window_start, $4, requests from counted where requests > 0
			on conflict (client_key, window_start, instance) do update set requests = greatest(w.requests, excluded.requests)
			returning w.client_key, w.window_start, w.requests
		)
		select c.client_key, c.window_start,
			coalesce((select sum(o.requests) from api_rate_windows o
				where o.client_key = c.client_key and o.window_start = c.window_start and o.instance <> $4), 0)::bigint
			+ coalesce((select own.requests from written own
				where own.client_key = c.client_key and own.window_start = c.window_start), 0) as requests
		from counted c
		where c.requests > 0 or exists (select from api_rate_windows o
			where o.client_key = c.client_key and o.window_start = c.window_start)`,
		keys, starts, requests, instance)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[APIRequests])
}

// DeleteAPIRateWindows deletes windows that started before before, a batch
// at a time.
func DeleteAPIRateWindows(ctx context.Context, q database.Querier, before time.Time) (int64, error) {
	tag, err := q.Exec(ctx, `delete from api_rate_windows where (client_key, window_start) in (
		select client_key, window_start from api_rate_windows where window_start < $1 limit 1000)`, before)
	return tag.RowsAffected(), err
}
