package store

import (
	"context"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestACreateConfirmsItsKeyByThePrimaryKey: the generic plan of a create's
// insert finds the subject key it confirms by the primary key, also while
// subject_keys is small, as in a new database: asked for by destroyed_at,
// PostgreSQL walked the organization's live keys in the index of live
// subjects, whose predicate that is, and kept that plan as the table grew.
func TestACreateConfirmsItsKeyByThePrimaryKey(t *testing.T) {
	t.Parallel()
	if dbtest.Citus() {
		t.Skip("Citus plans the statement on the organization's node: make test checks the plan on plain PostgreSQL")
	}
	pool := dbtest.New(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `set plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `prepare create_flow as `+insertFlowSQL); err != nil {
		t.Fatal(err)
	}
	nulls := strings.TrimSuffix(strings.Repeat("null, ", 4+len(createColumns)), ", ")
	rows, err := conn.Query(ctx, `explain (costs off) execute create_flow(`+nulls+`)`)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "subject_keys_pkey") || strings.Contains(text, "subject_keys_subject_idx") {
		t.Errorf("the create's insert does not find its key by the primary key:\n%s", text)
	}
}
