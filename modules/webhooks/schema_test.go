package webhooks_test

import (
	"context"
	"testing"
)

// TestNoIndexHoldsWhatAnAttemptWrites: an attempt updates its delivery's
// state, last error and finish time, whether it is held in its flow's order
// and its throttle slot, and a redelivery or a recovery its job and URL. With none of them in an index of webhook_events, nor in an
// index's predicate, PostgreSQL updates the row in place (HOT, migration
// 020); migration 022's keys by organization must keep it so.
func TestNoIndexHoldsWhatAnAttemptWrites(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	rows, err := pool.Query(context.Background(), `
		select i.indexrelid::regclass::text, a.attname
		from pg_index i, pg_attribute a
		where i.indrelid = 'webhook_events'::regclass and a.attrelid = i.indrelid
		  and a.attname = any (array['state', 'last_error', 'finished_at', 'job_id', 'url', 'held', 'throttle_slot'])
		  and (a.attnum = any (i.indkey)
		    or pg_get_expr(i.indpred, i.indrelid) ~ ('\m' || a.attname || '\M')
		    or pg_get_expr(i.indexprs, i.indrelid) ~ ('\m' || a.attname || '\M'))`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var index, column string
		if err := rows.Scan(&index, &column); err != nil {
			t.Fatal(err)
		}
		t.Errorf("index %s holds %s, which an attempt updates", index, column)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The query finds what it looks for: the primary key holds id.
	if err := pool.QueryRow(context.Background(), `select count(*) from pg_index i, pg_attribute a
		where i.indrelid = 'webhook_events'::regclass and a.attrelid = i.indrelid and i.indisprimary
		  and a.attname = 'id' and a.attnum = any (i.indkey)`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the primary key's id column: %d %v", n, err)
	}
}
