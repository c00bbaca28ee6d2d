package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestMigrateCitusDistributesByOrganization: on a Citus cluster, `flowd
// migrate --citus` distributes every tenant table by organization_id,
// co-located, and leaves the rest on the coordinator; run again (here
// through FLOWD_CITUS) it changes nothing; and the flows of two
// organizations then live on different shards, on different workers.
func TestMigrateCitusDistributesByOrganization(t *testing.T) {
	if !dbtest.Citus() {
		t.Skip("needs a Citus cluster: make test-citus runs it (CI runs make test-citus after make test)")
	}
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewEmptyURL(t)
	migrate := func(env map[string]string, args ...string) {
		t.Helper()
		env["DATABASE_URL"] = url
		out, err := flowdtest.RunCLI(func(k string) string { return env[k] }, "", append([]string{"migrate"}, args...)...)
		if err != nil || !strings.Contains(out, "distributed by organization_id") {
			t.Fatalf("migrate %v: %q %v", args, out, err)
		}
	}
	migrate(map[string]string{}, "--citus")

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `select logicalrelid::text, column_to_column_name(logicalrelid, partkey), colocationid
		from pg_dist_partition order by 1`)
	if err != nil {
		t.Fatal(err)
	}
	type partition struct {
		column     string
		colocation int
	}
	distributed := map[string]partition{}
	for rows.Next() {
		var table string
		var p partition
		if err := rows.Scan(&table, &p.column, &p.colocation); err != nil {
			t.Fatal(err)
		}
		distributed[table] = p
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	flows := distributed["flows"]
	for _, table := range database.TenantTables {
		if p, ok := distributed[table]; !ok || p.column != "organization_id" || p.colocation != flows.colocation {
			t.Errorf("%s: %+v; want distributed by organization_id, co-located with flows %+v", table, p, flows)
		}
	}
	for table := range distributed {
		if !slices.Contains(database.TenantTables, table) {
			t.Errorf("%s is distributed; only tenant tables should be", table)
		}
	}

	layout := func() string {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, `select string_agg(format('%s %s %s..%s', logicalrelid, shardid, shardminvalue, shardmaxvalue), ',' order by shardid)
			from pg_dist_shard`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := layout()
	migrate(map[string]string{"FLOWD_CITUS": "true"})
	if again := layout(); again != first {
		t.Fatalf("a second migrate --citus changed the shards:\n%s\n%s", first, again)
	}

	// Two organizations whose shards are on different workers, by Citus's hash.
	var orgs []string
	var nodes []int
	for i := 0; len(orgs) < 2 && i < 100; i++ {
		org := fmt.Sprintf("org-%d", i)
		var port int
		if err := conn.QueryRow(ctx, `select nodeport from citus_shards
			where table_name = 'flows'::regclass and shardid = get_shard_id_for_distribution_column('flows', $1::text)`,
			org).Scan(&port); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(nodes, port) {
			orgs, nodes = append(orgs, org), append(nodes, port)
		}
	}
	if len(orgs) < 2 {
		t.Fatalf("found no two organizations on different workers: %v", nodes)
	}
	for _, org := range orgs {
		if _, err := conn.Exec(ctx, `insert into flows (id, organization_id, flow_number, reference_id, sandbox, pii_key_id,
			national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, process_instance_id, flow_definition_id,
			flow_definition_version, created_by, expires_at)
			values (gen_random_uuid(), $1, 1, 'REF-1', false, 'k', '\x00', '\x00', '\x00', 'https://x.example',
			gen_random_uuid(), 'consent', 1, 'test', now() + interval '1 day')`, org); err != nil {
			t.Fatal(err)
		}
	}
	// Where each flow is, as the shards themselves hold it.
	rows, err = conn.Query(ctx, `select s.shardid, s.nodeport, r.result
		from run_command_on_shards('flows', $$select coalesce(string_agg(organization_id, ','), '') from %s$$) r
		join citus_shards s using (shardid) where r.success and r.result <> ''`)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string][2]int{} // organization: shard, port
	for rows.Next() {
		var shard int64
		var port int
		var result string
		if err := rows.Scan(&shard, &port, &result); err != nil {
			t.Fatal(err)
		}
		for _, org := range strings.Split(result, ",") {
			held[org] = [2]int{int(shard), port}
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	a, b := held[orgs[0]], held[orgs[1]]
	if a[0] == 0 || b[0] == 0 || a[0] == b[0] || a[1] == b[1] {
		t.Fatalf("flows of %s on shard %d (port %d), of %s on shard %d (port %d): want different shards on different workers",
			orgs[0], a[0], a[1], orgs[1], b[0], b[1])
	}
}

// TestMigrateCitusNeedsCitus: on plain PostgreSQL, --citus says what is
// missing rather than half doing it.
func TestMigrateCitusNeedsCitus(t *testing.T) {
	if dbtest.Citus() {
		t.Skip("tests migrate --citus on plain PostgreSQL: make test runs it")
	}
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbtest.NewURL(t)}
	out, err := flowdtest.RunCLI(func(k string) string { return env[k] }, "", "migrate", "--citus")
	if err == nil || !strings.Contains(err.Error(), "citus extension is not installed") || !strings.Contains(out, "migrations are current") {
		t.Fatalf("migrate --citus on PostgreSQL: %q %v", out, err)
	}
}
