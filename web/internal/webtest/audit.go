package webtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BreakAuditLog makes every insert into the audit log fail, as a full disk,
// a lost privilege or a bad entry would, until the returned function mends
// it. A check that no row passes does it on PostgreSQL and Citus alike
// (Citus has no triggers on distributed tables).
func BreakAuditLog(t *testing.T, pool *pgxpool.Pool) (mend func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `alter table audit_log add constraint test_break_audit check (false) not valid`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := pool.Exec(ctx, `alter table audit_log drop constraint test_break_audit`); err != nil {
			t.Fatal(err)
		}
	}
}
