package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// TestOrderingReadsOnlyTheFlowsDeliveries: the statements that keep a
// flow's deliveries to an ordered endpoint in order read the flow's
// deliveries, not every delivery of the endpoint, also while the table has
// no statistics yet (a table that has just grown, as after a deploy).
func TestOrderingReadsOnlyTheFlowsDeliveries(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	const org, endpoint, deliveries = "org-1", "01970c7d-1a2b-7c3d-8e4f-5a6b7c8d9e0f", 2000
	// Autovacuum must not give the table the statistics this is about.
	for _, sql := range []string{
		`alter table webhook_events set (autovacuum_enabled = false)`,
		`alter table events set (autovacuum_enabled = false)`,
		`insert into webhook_endpoints (organization_id, id, url, description, event_types, enabled, ordering)
			values ('org-1', '01970c7d-1a2b-7c3d-8e4f-5a6b7c8d9e0f', 'https://hooks.example/a', '', '{}', true, 'per-flow')`,
		// Each flow has one event; flow-1 has a second, whose delivery
		// waits for the first's.
		fmt.Sprintf(`insert into events (organization_id, id, flow_id, sequence, type, body)
			select 'org-1', gen_random_uuid(), 'flow-' || i, 1, 'flow.created', '{}' from generate_series(1, %d) i
			union all select 'org-1', '01970c7d-0000-7000-8000-000000000002', 'flow-1', 2, 'flow.opened', '{}'`, deliveries),
		`insert into webhook_events (id, organization_id, flow_id, type, url, body, job_id, event_id, endpoint_id)
			select e.id, e.organization_id, e.flow_id, e.type, 'https://hooks.example/a', '{}', 0, e.id, '01970c7d-1a2b-7c3d-8e4f-5a6b7c8d9e0f'
			from events e`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	const second = "01970c7d-0000-7000-8000-000000000002"
	var first string
	if err := pool.QueryRow(ctx, `select id::text from webhook_events where flow_id = 'flow-1' and id <> $1`, second).Scan(&first); err != nil {
		t.Fatal(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	db := &rowsRead{tx: tx, t: t}
	ev, _, err := store.GetEventAndSecrets(ctx, db, org, second)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Policy.InOrder() || !ev.Policy.PendingBefore {
		t.Fatalf("the second delivery's policy %+v: want it in order, behind a pending one", ev.Policy)
	}
	held, err := store.HoldInOrder(ctx, db, org, second, ev.Policy)
	if err != nil || !held {
		t.Fatalf("the second delivery is not held (%v) behind the first", err)
	}
	firstPolicy := ev.Policy
	firstPolicy.Sequence = 1
	next, err := store.ReleaseNext(ctx, db, org, firstPolicy)
	if err != nil || next == nil || next.ID != second {
		t.Fatalf("released %+v (%v), want the second delivery", next, err)
	}
	for statement, n := range db.read {
		if n > 10 {
			t.Errorf("read %d rows of webhook_events, of %d, for a flow of 2 deliveries:\n%s", n, deliveries+1, statement)
		}
	}
	if len(db.read) < 3 {
		t.Errorf("saw %d statements on webhook_events, want at least 3", len(db.read))
	}
}

// rowsRead is a database.Querier that runs each statement first under EXPLAIN
// ANALYZE, rolled back, and notes the rows of webhook_events it read.
type rowsRead struct {
	tx   pgx.Tx
	t    *testing.T
	read map[string]int // statement → rows read
}

func (r *rowsRead) explain(ctx context.Context, sql string, args []any) {
	r.t.Helper()
	if strings.Contains(sql, "pg_advisory_xact_lock") {
		return
	}
	if _, err := r.tx.Exec(ctx, "savepoint explain"); err != nil {
		r.t.Fatal(err)
	}
	var plan []map[string]any
	if err := r.tx.QueryRow(ctx, "explain (analyze, format json) "+sql, args...).Scan(&plan); err != nil {
		r.t.Fatalf("explain %s: %v", sql, err)
	}
	if _, err := r.tx.Exec(ctx, "rollback to savepoint explain"); err != nil {
		r.t.Fatal(err)
	}
	if r.read == nil {
		r.read = map[string]int{}
	}
	r.read[sql] += webhookEventRows(plan)
}

// webhookEventRows sums the rows that a plan's scans of webhook_events (or,
// on Citus, of its shards) returned and filtered out.
func webhookEventRows(node any) int {
	n := 0
	switch v := node.(type) {
	case []any:
		for _, c := range v {
			n += webhookEventRows(c)
		}
	case []map[string]any:
		for _, c := range v {
			n += webhookEventRows(c)
		}
	case map[string]any:
		if name, _ := v["Relation Name"].(string); strings.HasPrefix(name, "webhook_events") {
			loops, _ := v["Actual Loops"].(float64)
			rows, _ := v["Actual Rows"].(float64)
			removed, _ := v["Rows Removed by Filter"].(float64)
			n += int(loops * (rows + removed))
		}
		for _, c := range v {
			n += webhookEventRows(c)
		}
	}
	return n
}

func (r *rowsRead) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.explain(ctx, sql, args)
	return r.tx.Exec(ctx, sql, args...)
}

func (r *rowsRead) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.explain(ctx, sql, args)
	return r.tx.Query(ctx, sql, args...)
}

func (r *rowsRead) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	r.explain(ctx, sql, args)
	return r.tx.QueryRow(ctx, sql, args...)
}

var _ database.Querier = (*rowsRead)(nil)
