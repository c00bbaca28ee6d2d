package database_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/consent"
)

// beforeOrganizationKeys is the last migration before the tenant tables were
// keyed by organization (021).
const beforeOrganizationKeys = 20

// fillBeforeOrganizationKeys fills the tenant tables as they were before
// migration 021: 30 flows of three organizations, their tasks, incidents,
// attachments, idempotency keys and consent requests, and deletions and
// audit entries. It returns the consent link tokens, by flow id.
func fillBeforeOrganizationKeys(t *testing.T, pool *pgxpool.Pool, sealer *pii.Sealer) map[string]string {
	t.Helper()
	ctx := context.Background()
	for _, sql := range []string{`
		insert into flows (id, organization_id, flow_number, reference_id, sandbox, pii_key_id,
			national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, process_instance_id,
			flow_definition_id, flow_definition_version, created_by, expires_at)
		select ('00000000-0000-7000-8000-' || lpad(to_hex(n), 12, '0'))::uuid, 'org-' || n % 3, n, 'REF-' || n,
			false, 'k', '\x00', '\x00', '\x00', 'https://x.example', gen_random_uuid(), 'consent', 1, 'test',
			now() + interval '1 day'
		from generate_series(1, 30) n`, `
		insert into flow_tasks (id, flow_id, task_type, task_category, status)
		select gen_random_uuid(), id, 'consent', 'user-task', 'pending' from flows`, `
		insert into flow_tasks (id, flow_id, task_type, task_category, status)
		select gen_random_uuid(), id, 'send-initiate-webhook', 'service-task', 'failed' from flows where flow_number % 2 = 0`, `
		insert into flow_incidents (id, flow_id, task_id, task_type, message)
		select gen_random_uuid(), flow_id, id, task_type, 'receiver down' from flow_tasks where status = 'failed'`, `
		insert into flow_attachments (organization_id, id, flow_id, kind, content_type, body)
		select organization_id, gen_random_uuid(), id, 'consent-receipt', 'application/jwt', 'a.b.c' from flows
		where flow_number % 3 = 0`, `
		insert into flow_idempotency_keys (organization_id, key, request_hash, flow_id, pii_key_id, expires_at)
		select organization_id, 'key-' || flow_number, '\x00', id, 'k', now() + interval '1 day' from flows`, `
		insert into flow_deletions (organization_id, flow_id, reference_id, deleted_by)
		select 'org-' || n % 3, gen_random_uuid(), 'GONE-' || n, 'test' from generate_series(1, 5) n`, `
		insert into audit_log (organization_id, actor, action)
		select 'org-' || n % 3, 'staff:ada', 'flow.cancel' from generate_series(1, 7) n`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Consent links as they were made then: 32 random bytes, no route.
	rows, err := pool.Query(ctx, `select id::text, organization_id from flows order by flow_number`)
	if err != nil {
		t.Fatal(err)
	}
	type flow struct{ id, org string }
	var all []flow
	for rows.Next() {
		var f flow
		if err := rows.Scan(&f.id, &f.org); err != nil {
			t.Fatal(err)
		}
		all = append(all, f)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	tokens := map[string]string{}
	for i, f := range all {
		raw := sha256.Sum256([]byte(fmt.Sprint("token ", i)))
		token := base64.RawURLEncoding.EncodeToString(raw[:])
		hash := sha256.Sum256([]byte(token))
		if _, err := pool.Exec(ctx, `insert into consent_requests (flow_id, organization_id, token_hash, pii_key_id, token_sealed)
			values ($1, $2, $3, $4, $5)`, f.id, f.org, hash[:], sealer.KeyID(), sealer.Seal(token, "consent:"+f.id+":token")); err != nil {
			t.Fatal(err)
		}
		tokens[f.id] = token
	}
	return tokens
}

// tenantCounts counts the rows of the tables fillBeforeOrganizationKeys fills.
var tenantCounts = []string{"flows", "flow_tasks", "flow_incidents", "flow_attachments",
	"flow_deletions", "consent_requests", "audit_log"}

// rowCounts counts the rows of each of tables.
func rowCounts(t *testing.T, pool *pgxpool.Pool, tables []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range tables {
		var n int
		if err := pool.QueryRow(context.Background(), "select count(*) from "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

// TestKeyingTenantTablesByOrganizationKeepsEveryRow: migration 021 runs on
// a database filled by the schema before it and loses no row; tasks and
// incidents take their flow's organization, every tenant table can then be
// distributed, the keys between them still cascade, and consent links made
// before still lead to their flows. On Citus (FLOWD_TEST_CITUS=1) the
// database is then distributed, and the same holds.
func TestKeyingTenantTablesByOrganizationKeepsEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := database.Open(ctx, dbtest.NewEmptyURL(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := database.MigrateTo(ctx, pool, beforeOrganizationKeys); err != nil {
		t.Fatal(err)
	}
	sealer, err := pii.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := fillBeforeOrganizationKeys(t, pool, sealer)
	before := rowCounts(t, pool, tenantCounts)
	if before["flow_incidents"] != 15 || before["consent_requests"] != 30 {
		t.Fatalf("filled %v", before)
	}

	if err := database.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if dbtest.Citus() {
		if err := database.Distribute(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			t.Fatal(err)
		}
	}
	if after := rowCounts(t, pool, tenantCounts); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("rows before the migration %v, after %v", before, after)
	}
	// Each row joins its flow (and an incident its task) by organization.
	for _, c := range []struct{ table, sql string }{
		{"flow_tasks", `select count(*) from flow_tasks t
			join flows f on f.organization_id = t.organization_id and f.id = t.flow_id`},
		{"flow_incidents", `select count(*) from flow_incidents i
			join flow_tasks t on t.organization_id = i.organization_id and t.id = i.task_id
			join flows f on f.organization_id = i.organization_id and f.id = i.flow_id`},
		{"flow_attachments", `select count(*) from flow_attachments a
			join flows f on f.organization_id = a.organization_id and f.id = a.flow_id`},
	} {
		var n int
		if err := pool.QueryRow(ctx, c.sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != before[c.table] {
			t.Errorf("%s: %d of %d rows join their flow by organization", c.table, n, before[c.table])
		}
	}
	for _, table := range database.TenantTables {
		if keyed, err := database.KeyedByOrganization(ctx, pool, table); err != nil || !keyed {
			t.Errorf("%s: keys do not all include organization_id (%v)", table, err)
		}
	}

	// Flow 6 (org-0) has two tasks, an incident and an attachment: they go with it.
	if _, err := pool.Exec(ctx, `delete from flows where organization_id = 'org-0' and flow_number = 6`); err != nil {
		t.Fatal(err)
	}
	after := rowCounts(t, pool, tenantCounts)
	for table, gone := range map[string]int{"flows": 1, "flow_tasks": 2, "flow_incidents": 1, "flow_attachments": 1} {
		if before[table]-after[table] != gone {
			t.Errorf("deleting a flow took %d rows of %s, want %d", before[table]-after[table], table, gone)
		}
	}

	links := consent.NewRequests(pool, sealer, "https://flowd.example")
	for flowID, token := range tokens {
		var org string
		if err := pool.QueryRow(ctx, `select organization_id from consent_requests where flow_id = $1`, flowID).Scan(&org); err != nil {
			t.Fatal(err)
		}
		got, err := links.FlowForToken(ctx, token)
		if err != nil || got != (consent.FlowRef{OrganizationID: org, FlowID: flowID}) {
			t.Fatalf("a link made before the migration: %+v, %v; want flow %s of %s", got, err, flowID, org)
		}
		if link, err := links.URL(ctx, org, flowID); err != nil || link != "https://flowd.example/consent/"+token {
			t.Fatalf("the link of %s: %q, %v", flowID, link, err)
		}
	}
}

// TestEveryTableIsTenantOrCoordinatorTable: each table a migration makes is
// listed as distributed or kept on the coordinator, so that
// nobody adds a table without deciding where it lives on Citus.
func TestEveryTableIsTenantOrCoordinatorTable(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	tables, err := database.UnclassifiedTables(context.Background(), pool)
	if err != nil || len(tables) > 0 {
		t.Fatalf("tables no list of internal/database/citus.go names: %v %v", tables, err)
	}
}

// TestKeyedByOrganization: Citus distributes a table by organization_id only
// when every key of it includes that column; --citus leaves the others local.
func TestKeyedByOrganization(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	for _, c := range []struct {
		table, columns string
		want           bool
	}{
		{"keyed", "organization_id text, id int, primary key (organization_id, id)", true},
		{"keyless", "organization_id text, note text", true},
		{"primary_key_without", "organization_id text, id int primary key", false},
		{"unique_without", "organization_id text, id int, code text unique, primary key (organization_id, id)", false},
		{"no_organization", "id int primary key", false},
	} {
		if _, err := pool.Exec(ctx, "create table "+c.table+" ("+c.columns+")"); err != nil {
			t.Fatal(err)
		}
		if got, err := database.KeyedByOrganization(ctx, pool, c.table); err != nil || got != c.want {
			t.Errorf("%s (%s): %v %v, want %v", c.table, c.columns, got, err, c.want)
		}
	}
}

// beforeWebhookKeys is the last migration before the webhooks module's
// tables were keyed by organization (022).
const beforeWebhookKeys = 21

// webhookTables are the webhooks module's tables.
var webhookTables = []string{"events", "webhook_secrets", "webhook_endpoints", "webhook_events", "webhook_attempts", "webhook_recoveries"}

// TestKeyingWebhooksByOrganizationKeepsEveryRow: migration 022 runs on a
// database filled by the schema before it and loses no row; every attempt
// takes its delivery's organization and still cascades with it, the delivery
// jobs queued before name their delivery's organization, and every webhooks
// table can then be distributed. On Citus (FLOWD_TEST_CITUS=1) the database
// is then distributed, and the same holds.
func TestKeyingWebhooksByOrganizationKeepsEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := database.Open(ctx, dbtest.NewEmptyURL(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := database.MigrateTo(ctx, pool, beforeWebhookKeys); err != nil {
		t.Fatal(err)
	}
	if err := database.MigrateRiver(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// 30 events of three organizations, each delivered to its flow's URL
	// (the delivery has the event's id) and every other one to an endpoint
	// too; each delivery has two attempts and a job that names no organization.
	for _, sql := range []string{`
		insert into webhook_secrets (organization_id, secret) select 'org-' || n, 'whsec_x' from generate_series(0, 2) n`, `
		insert into webhook_endpoints (organization_id, id, url) select 'org-' || n, gen_random_uuid(), 'https://hooks.example/' || n
		from generate_series(0, 2) n`, `
		insert into events (organization_id, id, flow_id, sequence, type, body)
		select 'org-' || n % 3, ('00000000-0000-7000-8000-' || lpad(to_hex(n), 12, '0'))::uuid, 'flow-' || n, 1, 'flow.created', '{}'
		from generate_series(1, 30) n`, `
		insert into webhook_events (id, event_id, organization_id, flow_id, task_id, type, url, body, job_id, state)
		select id, id, organization_id, flow_id, 'task-' || flow_id, type, 'https://flow.example', body, 0, 'failed' from events`, `
		insert into webhook_events (id, event_id, organization_id, flow_id, type, url, body, job_id, endpoint_id)
		select gen_random_uuid(), v.id, v.organization_id, v.flow_id, v.type, e.url, v.body, 0, e.id
		from events v join webhook_endpoints e on e.organization_id = v.organization_id where v.sequence = 1 and v.flow_id ~ '[02468]$'`, `
		insert into webhook_attempts (event_id, attempted_at, status_code, latency_us)
		select id, now(), 503, 1000 from webhook_events, generate_series(1, 2)`, `
		insert into webhook_recoveries (organization_id, id, endpoint_id, since, total, requested_by)
		select organization_id, gen_random_uuid(), id, now() - interval '1 day', 1, 'staff:ada' from webhook_endpoints`, `
		insert into river_job (args, kind, max_attempts, queue, state)
		select jsonb_build_object('event_id', id), 'flowd.webhook_delivery', 8, 'webhooks', 'retryable' from webhook_events`, `
		update webhook_events e set job_id = j.id from river_job j where j.args->>'event_id' = e.id::text`, `
		insert into river_job (args, kind, max_attempts, queue, state)
		values ('{"organization_id": "org-1", "recovery_id": "r"}', 'flowd.webhook_recovery', 4, 'webhook_recoveries', 'available')`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	before := rowCounts(t, pool, webhookTables)
	if before["webhook_events"] != 45 || before["webhook_attempts"] != 90 {
		t.Fatalf("filled %v", before)
	}

	if err := database.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// Every delivery job names its delivery's organization; the other jobs are as they were.
	var named, jobs int
	if err := pool.QueryRow(ctx, `select count(*) filter (where j.args->>'organization_id' = e.organization_id), count(*)
		from river_job j left join webhook_events e on e.id::text = j.args->>'event_id'
		where j.kind = 'flowd.webhook_delivery'`).Scan(&named, &jobs); err != nil {
		t.Fatal(err)
	}
	if named != 45 || jobs != 45 {
		t.Errorf("%d of %d delivery jobs name their delivery's organization, want 45", named, jobs)
	}
	var args string
	if err := pool.QueryRow(ctx, `select args::text from river_job where kind = 'flowd.webhook_recovery'`).Scan(&args); err != nil ||
		args != `{"recovery_id": "r", "organization_id": "org-1"}` {
		t.Errorf("a recovery job's args: %s %v", args, err)
	}
	if dbtest.Citus() {
		if err := database.Distribute(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			t.Fatal(err)
		}
	}
	if after := rowCounts(t, pool, webhookTables); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("rows before the migration %v, after %v", before, after)
	}
	var linked int
	if err := pool.QueryRow(ctx, `select count(*) from webhook_attempts a
		join webhook_events e on e.organization_id = a.organization_id and e.id = a.event_id`).Scan(&linked); err != nil {
		t.Fatal(err)
	}
	if linked != before["webhook_attempts"] {
		t.Errorf("%d of %d attempts join their delivery by organization", linked, before["webhook_attempts"])
	}
	for _, table := range []string{"events", "webhook_secrets", "webhook_endpoints", "webhook_events", "webhook_attempts", "webhook_recoveries"} {
		if keyed, err := database.KeyedByOrganization(ctx, pool, table); err != nil || !keyed {
			t.Errorf("%s: keys do not all include organization_id (%v)", table, err)
		}
	}
	var leftover *string
	if err := pool.QueryRow(ctx, `select to_regclass('flow_tasks_id_idx')::text`).Scan(&leftover); err != nil || leftover != nil {
		t.Errorf("021's index of tasks by id alone: %v %v", leftover, err)
	}

	// The flow's own delivery of flow-2's event (org-2) has two attempts,
	// and they go with it.
	if _, err := pool.Exec(ctx, `delete from webhook_events
		where organization_id = 'org-2' and flow_id = 'flow-2' and endpoint_id is null`); err != nil {
		t.Fatal(err)
	}
	after := rowCounts(t, pool, webhookTables)
	for table, gone := range map[string]int{"webhook_events": 1, "webhook_attempts": 2, "events": 0} {
		if before[table]-after[table] != gone {
			t.Errorf("deleting a delivery took %d rows of %s, want %d", before[table]-after[table], table, gone)
		}
	}
}

// TestASchemaMigratedFurtherStaysCurrent: during a rolling upgrade the new
// instances migrate first; an earlier build then finds a schema newer than
// its migrations, which it must neither try to undo nor report as not ready.
func TestASchemaMigratedFurtherStaysCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	if _, err := pool.Exec(ctx, `update schema_version set version = version + 1`); err != nil {
		t.Fatal(err)
	}
	if err := database.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrating a schema one migration ahead: %v", err)
	}
	var version int
	if err := pool.QueryRow(ctx, `select version from schema_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	current, err := database.MigrationsCurrent(ctx, pool)
	if err != nil || !current {
		t.Fatalf("a schema one migration ahead (version %d): current %v, %v; want current", version, current, err)
	}
	if _, err := pool.Exec(ctx, `update schema_version set version = version - 2`); err != nil {
		t.Fatal(err)
	}
	if current, err := database.MigrationsCurrent(ctx, pool); err != nil || current {
		t.Fatalf("a schema one migration behind: current %v, %v; want not current", current, err)
	}
}

// River's migrations count as current from its migration table: a schema
// without its latest migration, or without the table, is not current.
func TestRiverBehindIsNotCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, schema := range database.RiverSchemas {
		table := "river_migration"
		if schema != "" {
			table = schema + ".river_migration"
		}
		t.Run("latest migration missing in "+table, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.New(t)
			if current, err := database.MigrationsCurrent(ctx, pool); err != nil || !current {
				t.Fatalf("a migrated database: current %v, %v", current, err)
			}
			if _, err := pool.Exec(ctx, `delete from `+table+` where version = (select max(version) from `+table+`)`); err != nil {
				t.Fatal(err)
			}
			if current, err := database.MigrationsCurrent(ctx, pool); err != nil || current {
				t.Fatalf("without River's latest migration: current %v, %v; want not current", current, err)
			}
		})
		t.Run("no "+table, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.New(t)
			if _, err := pool.Exec(ctx, `drop table `+table); err != nil {
				t.Fatal(err)
			}
			if current, err := database.MigrationsCurrent(ctx, pool); err != nil || current {
				t.Fatalf("without %s: current %v, %v; want not current", table, current, err)
			}
		})
	}
}
