package database_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// beforeMissedEvents is the last migration before the one that holds an
// event to one delivery per endpoint and has endpoints remember when they
// were disabled.
const beforeMissedEvents = 27

// TestMigrationToOneDeliveryPerEndpoint: the migration after
// beforeMissedEvents keeps one delivery of an event to an endpoint where a
// redelivery had made a second beside a cancelled one (the one not
// cancelled; of cancelled ones only, the oldest), with its attempts, and
// leaves every other delivery alone; an endpoint disabled before it was
// disabled at its last change. On Citus it runs on the distributed tables,
// and a second delivery of an event to an endpoint is refused.
func TestMigrationToOneDeliveryPerEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := database.Open(ctx, dbtest.NewEmptyURL(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := database.MigrateTo(ctx, pool, beforeMissedEvents); err != nil {
		t.Fatal(err)
	}
	const (
		on  = "019ab3c6-1111-7f80-9a1b-2c3d4e5f6a7d"
		off = "019ab3c6-2222-7f80-9a1b-2c3d4e5f6a7d"
	)
	for _, sql := range []string{`
		insert into webhook_endpoints (organization_id, id, url, enabled, updated_at) values
			('org-1', '` + on + `', 'https://on.example/', true, now() - interval '2 days'),
			('org-1', '` + off + `', 'https://off.example/', false, now() - interval '1 day')`, `
		insert into events (organization_id, id, flow_id, sequence, type, body)
		select 'org-1', ('00000000-0000-7000-8000-' || lpad(to_hex(n), 12, '0'))::uuid, 'flow-' || n, 1, 'flow.created', '{}'
		from generate_series(1, 5) n`,
		// Each event's flow delivery, and its delivery to the endpoint.
		`insert into webhook_events (id, event_id, organization_id, flow_id, task_id, type, url, body, job_id, state)
		select id, id, organization_id, flow_id, 'task', type, 'https://flow.example', body, 0, 'delivered' from events`, `
		insert into webhook_events (id, event_id, organization_id, flow_id, type, url, body, job_id, endpoint_id, state, created_at)
		select gen_random_uuid(), id, organization_id, flow_id, type, 'https://on.example/', body, 0, '` + on + `',
			case when flow_id in ('flow-1', 'flow-2') then 'cancelled' else 'delivered' end, now() - interval '1 hour'
		from events`,
		// A redelivery made a second delivery of flow-1's event beside its
		// cancelled one, and two of flow-2's.
		`insert into webhook_events (id, event_id, organization_id, flow_id, type, url, body, job_id, endpoint_id, state)
		select gen_random_uuid(), id, organization_id, flow_id, type, 'https://on.example/', body, 0, '` + on + `', 'delivered'
		from events where flow_id = 'flow-1'`, `
		insert into webhook_events (id, event_id, organization_id, flow_id, type, url, body, job_id, endpoint_id, state)
		select gen_random_uuid(), id, organization_id, flow_id, type, 'https://on.example/', body, 0, '` + on + `', 'cancelled'
		from events where flow_id = 'flow-2'`, `
		insert into webhook_attempts (organization_id, event_id, attempted_at, status_code, latency_us)
		select organization_id, id, now(), 200, 1000 from webhook_events`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	// On Citus the database is distributed before the migration, as a
	// cluster upgraded to it is, when every tenant table exists by then.
	distribute := func() {
		if err := database.Distribute(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			t.Fatal(err)
		}
	}
	var missing int
	if err := pool.QueryRow(ctx, `select count(*) from unnest($1::text[]) t where to_regclass(t) is null`,
		database.TenantTables).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if dbtest.Citus() && missing == 0 {
		distribute()
	}
	if err := database.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if dbtest.Citus() && missing > 0 {
		distribute()
	}
	rows, err := pool.Query(ctx, `select e.flow_id, count(*)::int, min(e.state), bool_and(e.created_at < now() - interval '30 minutes'),
			sum((select count(*) from webhook_attempts a where a.organization_id = e.organization_id and a.event_id = e.id))::int
		from webhook_events e where e.endpoint_id = $1 group by e.flow_id order by e.flow_id`, on)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var flow, state string
		var n, attempts int
		var oldest bool
		if err := rows.Scan(&flow, &n, &state, &oldest, &attempts); err != nil {
			t.Fatal(err)
		}
		if n != 1 || attempts != 1 {
			t.Errorf("%s: %d deliveries with %d attempts, want one with its attempt", flow, n, attempts)
		}
		got[flow] = state
		if flow == "flow-2" && !oldest {
			t.Error("flow-2 kept the newer of its two cancelled deliveries")
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"flow-1": "delivered", "flow-2": "cancelled", "flow-3": "delivered", "flow-4": "delivered", "flow-5": "delivered"}
	for flow, state := range want {
		if got[flow] != state {
			t.Errorf("%s's delivery to the endpoint is %q, want %q", flow, got[flow], state)
		}
	}
	var own int
	if err := pool.QueryRow(ctx, `select count(*) from webhook_events where endpoint_id is null`).Scan(&own); err != nil || own != 5 {
		t.Errorf("%d deliveries to the flows' URLs, want the 5 (%v)", own, err)
	}
	var disabledAt, enabledAt *bool
	if err := pool.QueryRow(ctx, `select (select disabled_at = updated_at from webhook_endpoints where id = $1),
			(select disabled_at is null from webhook_endpoints where id = $2)`, off, on).Scan(&disabledAt, &enabledAt); err != nil ||
		disabledAt == nil || !*disabledAt || enabledAt == nil || !*enabledAt {
		t.Errorf("disabled_at: of the disabled endpoint at its last change %v, of the enabled one null %v (%v)", disabledAt, enabledAt, err)
	}
	_, err = pool.Exec(ctx, `insert into webhook_events (id, event_id, organization_id, flow_id, type, url, body, job_id, endpoint_id)
		select gen_random_uuid(), id, organization_id, flow_id, type, 'https://on.example/', body, 0, '`+on+`'
		from events where flow_id = 'flow-3'`)
	if !database.IsUniqueViolation(err, "webhook_events_endpoint_event") {
		t.Errorf("a second delivery of an event to an endpoint: %v, want the unique index's violation", err)
	}
}
