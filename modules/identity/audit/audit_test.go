package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/identity"
)

// fixture is the audit log of a fresh database and an organization's id.
type fixture struct {
	m    *Store
	pool *pgxpool.Pool
	org  struct{ ID string }
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	pool := dbtest.New(t)
	m, err := New(pool)
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{m: m, pool: pool}
	f.org.ID = "6f1c3a52-1d8e-4a7b-9c1e-2b7d4e5f6a70"
	return f
}

func TestAuditLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i := range 5 {
		if err := f.m.RecordAudit(ctx, identity.AuditEntry{OrganizationID: f.org.ID, Actor: "staff:ada", Action: identity.AuditFlowDelete,
			Target: fmt.Sprintf("TB-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.m.RecordAudit(ctx, identity.AuditEntry{OrganizationID: "another-org", Actor: "staff:oscar", Action: identity.AuditClientCreate}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []identity.AuditEntry{
		{Actor: "staff:ada", Action: identity.AuditFlowDelete},
		{OrganizationID: f.org.ID, Action: identity.AuditFlowDelete},
		{OrganizationID: f.org.ID, Actor: "staff:ada", Action: "Drop Table"},
		{OrganizationID: f.org.ID, Actor: "staff:ada", Action: identity.AuditFlowDelete, Detail: strings.Repeat("x", 501)},
	} {
		if err := f.m.RecordAudit(ctx, bad); apperr.CodeOf(err) != apperr.Invalid {
			t.Errorf("RecordAudit(%+v) = %v, want Invalid", bad, err)
		}
	}

	page, more, err := f.m.AuditLog(ctx, f.org.ID, 3, 0)
	if err != nil || !more || len(page) != 3 || page[0].Target != "TB-4" || page[2].Target != "TB-2" || page[0].Actor != "staff:ada" {
		t.Fatalf("first page: %+v more=%v err=%v", page, more, err)
	}
	rest, more, err := f.m.AuditLog(ctx, f.org.ID, 3, page[2].ID)
	if err != nil || more || len(rest) != 2 || rest[0].Target != "TB-1" || rest[1].Target != "TB-0" {
		t.Fatalf("second page: %+v more=%v err=%v", rest, more, err)
	}
	other, _, err := f.m.AuditLog(ctx, "another-org", 10, 0)
	if err != nil || len(other) != 1 || other[0].Actor != "staff:oscar" {
		t.Fatalf("another organization's log: %+v %v", other, err)
	}
}

// TestRecordAuditTxCommitsWithItsTransaction: an entry recorded in a
// transaction is there only if that transaction commits, and a bad entry is
// refused with the fields that are wrong.
func TestRecordAuditTxCommitsWithItsTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rollback := errors.New("roll back")
	err := database.WithTx(ctx, f.pool, func(tx database.Tx) error {
		if err := f.m.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: f.org.ID, Actor: "staff:ada", Action: identity.AuditFlowCancel, Target: "TB-1"}); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	err = database.WithTx(ctx, f.pool, func(tx database.Tx) error {
		return f.m.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: f.org.ID, Actor: "staff:ada", Action: identity.AuditFlowCancel, Target: "TB-2"})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = database.WithTx(ctx, f.pool, func(tx database.Tx) error {
		return f.m.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: f.org.ID, Actor: "staff:ada", Action: "Not An Action"})
	})
	if e, ok := apperr.As(err); !ok || e.Code != apperr.Invalid || len(e.Fields) != 1 || e.Fields[0].Field != "action" {
		t.Fatalf("a bad entry: %v, want Invalid naming action", err)
	}
	log, _, err := f.m.AuditLog(ctx, f.org.ID, 10, 0)
	if err != nil || len(log) != 1 || log[0].Target != "TB-2" {
		t.Fatalf("audit log %+v %v, want only the committed entry TB-2", log, err)
	}
}

// TestQueueAuditWritesEveryOrganizationsEntryWithItsBatch: the entries of
// several organizations queued in a batch are written together, in one
// statement, and only when the batch commits; a batch with a bad entry
// queues none of them.
func TestQueueAuditWritesEveryOrganizationsEntryWithItsBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	other := "0b9e1d6c-3f2a-4c58-8e7d-5a6b7c8d9e0f"
	entries := []identity.AuditEntry{
		{OrganizationID: f.org.ID, Actor: "end-user", Action: "person_page.viewed", Target: "TB-1, TB-2", Detail: "2 flows"},
		{OrganizationID: other, Actor: "end-user", Action: "person_page.viewed", Target: "OB-1", Detail: "1 flows"},
	}
	var failing database.Batch
	if err := f.m.QueueAudit(&failing, entries); err != nil || failing.Len() != 1 {
		t.Fatalf("queued %d statements, %v; want 1", failing.Len(), err)
	}
	failing.QueueExec(`select 1/0`, nil)
	if err := failing.Send(ctx, f.pool); err == nil {
		t.Fatal("a batch with a failing statement succeeded")
	}
	var bad database.Batch
	err := f.m.QueueAudit(&bad, append(entries[:1:1], identity.AuditEntry{OrganizationID: other, Actor: "end-user", Action: "Not An Action"}))
	if apperr.CodeOf(err) != apperr.Invalid || bad.Len() != 0 {
		t.Fatalf("a bad entry: %v, %d statements queued; want Invalid and none", err, bad.Len())
	}
	var b database.Batch
	if err := f.m.QueueAudit(&b, entries); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		log, _, err := f.m.AuditLog(ctx, e.OrganizationID, 10, 0)
		if err != nil || len(log) != 1 || log[0].Target != e.Target || log[0].Detail != e.Detail || log[0].Action != e.Action {
			t.Errorf("the log of %s: %+v, %v; want only %+v", e.OrganizationID, log, err, e)
		}
	}
}

// TestQueueAuditOnceCoalescesRepetitions: an entry queued again within the
// window is not appended again, in one batch or the next; one that differs
// in anything, of another organization, or whose like is older than the
// window is.
func TestQueueAuditOnceCoalescesRepetitions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	view := identity.AuditEntry{OrganizationID: f.org.ID, Actor: "end-user", Action: "person_page.viewed", Target: "TB-1", Detail: "1 flows, sign-in aa"}
	send := func(entries ...identity.AuditEntry) {
		t.Helper()
		var b database.Batch
		if err := f.m.QueueAuditOnce(&b, entries, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(ctx, f.pool); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		t.Helper()
		var n int
		if err := f.pool.QueryRow(ctx, `select count(*) from audit_log where action = 'person_page.viewed'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	send(view)
	send(view)
	send(view, view)
	if n := count(); n != 1 {
		t.Fatalf("%d entries of one view repeated, want 1", n)
	}
	other := view
	other.Detail = "1 flows, sign-in bb"
	elsewhere := view
	elsewhere.OrganizationID = "another-org"
	more := view
	more.Target = "TB-1, TB-2"
	send(other, elsewhere, more)
	if n := count(); n != 4 {
		t.Fatalf("%d entries after three distinct views, want 4", n)
	}
	if _, err := f.pool.Exec(ctx, `update audit_log set at = now() - interval '61 minutes'`); err != nil {
		t.Fatal(err)
	}
	send(view)
	if n := count(); n != 5 {
		t.Fatalf("%d entries after the window, want 5", n)
	}
}
