package webtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SeedFailedDeliveries stores n events of org, each with a delivery to
// endpoint that failed for good an hour ago, and returns the events' ids.
func SeedFailedDeliveries(t testing.TB, pool *pgxpool.Pool, org, endpoint, url string, n int) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		with ev as (
			insert into events (organization_id, id, flow_id, sequence, type, body, created_at)
			select $1, gen_random_uuid(), gen_random_uuid()::text, 1, 'flow.accepted',
				'{"type":"flow.accepted","timestamp":"2026-01-02T03:04:05.000Z","data":{"sequence":1}}', now() - interval '1 hour'
			from generate_series(1, $3) g
			returning id, flow_id, body, created_at)
		insert into webhook_events (id, organization_id, flow_id, type, url, body, state, last_error, job_id,
			created_at, finished_at, event_id, endpoint_id)
		select gen_random_uuid(), $1, flow_id, 'flow.accepted', $4, body, 'failed', 'Webhook delivery failed: HTTP 503', 0,
			created_at, created_at, id, $2
		from ev
		returning event_id::text`, org, endpoint, n, url)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// InsertEndpoint stores an endpoint of org to url, bypassing the rules
// that keep the API's endpoints off loopback.
func InsertEndpoint(t testing.TB, pool *pgxpool.Pool, org, id, url string, enabled bool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `insert into webhook_endpoints (organization_id, id, url, enabled) values ($1, $2, $3, $4)`,
		org, id, url, enabled); err != nil {
		t.Fatal(err)
	}
}
