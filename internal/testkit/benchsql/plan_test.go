package benchsql

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestEveryStatementRunsAsPgbenchPreparesIt: each statement of every pgbench
// script is prepared as pgbench prepares it (-M prepared) and run with its
// values, more times than PostgreSQL plans a prepared statement for its
// values before it weighs a generic plan, after what the statements
// before it in the script set (the plan cache mode of a shared read's
// round trip), on a migrated database; on Citus (make test-citus) as
// flowbench -citus runs the scripts, without generic plans. A statement
// the database cannot plan that way fails here, not in the warm-up of a
// benchmark. A run that breaks a constraint was planned: what the values
// name need not exist.
func TestEveryStatementRunsAsPgbenchPreparesIt(t *testing.T) {
	t.Parallel()
	scripts, err := filepath.Glob(filepath.Join(root(t), "cmd", "flowbench", "sql", "*.sql"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts in cmd/flowbench/sql: %v", err)
	}
	pool := dbtest.New(t)
	// Values of the right types for flowbench's variables (-D).
	vars := map[string]string{
		"org": "00000000-0000-7000-8000-0000000000a1", "writeorg": "00000000-0000-7000-8000-0000000000a2",
		"client": "flowbench", "scopes": "{flows:read}", "flows": "1000",
		"cursor": "00000000-0000-7000-8000-000000000001", "cursor_at": "2026-01-01 00:00:00+00",
		"keyid": "k1", "nisealed": `\x00`, "nihmac": `\x00`, "lnsealed": `\x00`, "toksealed": `\x00`, "keysealed": `\x00`,
		"sknisealed": `\x00`, "pindexkey": "v1", "hookurl": "http://127.0.0.1:9/hook", "redirect": "https://example.com/done",
		"zerots": "0001-01-01 00:00:00+00", "job_id": "1",
		"generic": "1",
	}
	if dbtest.Citus() {
		vars["generic"] = "0"
	}
	for _, path := range scripts {
		script := filepath.Base(path)
		t.Run(script, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // nothing was meant to stay
			for i, p := range Run(t, script, vars) {
				switch strings.ToLower(strings.Fields(p.SQL)[0]) {
				case "begin", "commit":
					continue // the test's transaction stands for the script's
				}
				name := fmt.Sprintf("bench_%s_%d", strings.TrimSuffix(script, ".sql"), i)
				if _, err := tx.Prepare(ctx, name, p.SQL); err != nil {
					t.Fatalf("statement %d does not prepare: %v\n%s", i+1, err, p.SQL)
				}
				args := make([]string, len(p.Args))
				for j, a := range p.Args {
					args[j] = "'" + strings.ReplaceAll(a, "'", "''") + "'"
				}
				execute := "execute " + name
				if len(args) > 0 {
					execute += "(" + strings.Join(args, ", ") + ")"
				}
				// A set_config is for the statements after it; the others are
				// undone after each run.
				if strings.HasPrefix(p.SQL, "select set_config(") {
					if _, err := tx.Exec(ctx, execute); err != nil {
						t.Fatalf("statement %d: %v\n%s", i+1, err, p.SQL)
					}
					continue
				}
				for range 6 {
					if err := runUndone(ctx, tx, execute); err != nil {
						t.Fatalf("statement %d does not run: %v\n%s", i+1, err, p.SQL)
					}
				}
			}
		})
	}
}

// runUndone runs statement in a savepoint of tx, and undoes it; a broken
// constraint is no error.
func runUndone(ctx context.Context, tx pgx.Tx, statement string) error {
	if _, err := tx.Exec(ctx, "savepoint run"); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, statement)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "23") {
		err = nil
	}
	if _, undo := tx.Exec(ctx, "rollback to savepoint run"); err == nil {
		err = undo
	}
	return err
}
