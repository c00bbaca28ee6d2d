package flows_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/flows"
)

func TestProgressMovesTheFlowAlong(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.create(t, newFlow("ID-12345")).FlowID

	var f flows.Flow
	if err := b.inTx(func(tx pgx.Tx) (err error) {
		f, err = b.flows.MarkOpenedTx(ctx, tx, b.caller.OrganizationID, id)
		return
	}); err != nil {
		t.Fatal(err)
	}
	if f.ConsentStatus != flows.Opened || f.Version != 2 || f.OpenedAt == nil || f.NationalID != "ID-12345" {
		t.Fatalf("opened: %+v", f)
	}
	// Opening again changes nothing.
	if err := b.inTx(func(tx pgx.Tx) (err error) {
		f, err = b.flows.MarkOpenedTx(ctx, tx, b.caller.OrganizationID, id)
		return
	}); err != nil || f.Version != 2 {
		t.Fatalf("second open: %v %d", err, f.Version)
	}
	if err := b.inTx(func(tx pgx.Tx) (err error) {
		f, err = b.decideTx(ctx, tx, b.caller.OrganizationID, id, true, flows.Evidence{})
		return
	}); err != nil {
		t.Fatal(err)
	}
	if f.ConsentStatus != flows.Accepted || f.ProcessStatus != flows.Completed || f.Version != 3 || f.DecidedAt == nil || f.OpenedAt == nil ||
		f.NumAttachments != 1 {
		t.Fatalf("decided: %+v", f)
	}
	if got := b.get(t, id); got.ConsentStatus != flows.Accepted || got.Version != 3 || !got.UpdatedAt.Equal(f.UpdatedAt) || got.DecidedAt == nil ||
		got.NumAttachments != 1 {
		t.Fatalf("decided, as stored: %+v; RecordDecisionTx said %+v", got, f)
	}
	if err := b.inTx(func(tx pgx.Tx) error {
		_, err := b.decideTx(ctx, tx, b.caller.OrganizationID, id, false, flows.Evidence{})
		return err
	}); !errors.Is(err, flows.ErrNotActive) {
		t.Fatalf("deciding twice: %v", err)
	}
	if err := b.inTx(func(tx pgx.Tx) error { _, err := b.flows.MarkOpenedTx(ctx, tx, "org-b", id); return err }); !errors.Is(err, flows.ErrNotFound) {
		t.Fatalf("opening org-a's flow as org-b's: %v", err)
	}
	for _, unknown := range []string{"00000000-0000-0000-0000-000000000000", "not-an-id"} {
		if err := b.inTx(func(tx pgx.Tx) error {
			_, err := b.flows.MarkOpenedTx(ctx, tx, b.caller.OrganizationID, unknown)
			return err
		}); !errors.Is(err, flows.ErrNotFound) {
			t.Fatalf("opening unknown flow %q: %v", unknown, err)
		}
		if err := b.inTx(func(tx pgx.Tx) error {
			_, err := b.decideTx(ctx, tx, b.caller.OrganizationID, unknown, true, flows.Evidence{})
			return err
		}); !errors.Is(err, flows.ErrNotFound) {
			t.Fatalf("deciding unknown flow %q: %v", unknown, err)
		}
	}

	// Expiry cancels active flows whose consent is past due, and no others.
	due := b.create(t, newFlow("ID-2")).FlowID
	notDue := b.create(t, newFlow("ID-3")).FlowID
	if _, err := b.pool.Exec(ctx, `update flows set expires_at = now() - interval '1 minute' where id = any($1::uuid[])`, []string{due, id}); err != nil {
		t.Fatal(err)
	}
	n, err := b.flows.ExpireDue(ctx, time.Now(), 10)
	if err != nil || n != 1 {
		t.Fatalf("ExpireDue: %d %v", n, err)
	}
	if f := b.get(t, due); f.ProcessStatus != flows.Cancelled || f.Version != 2 {
		t.Fatalf("due flow: %s version %d", f.ProcessStatus, f.Version)
	}
	if f := b.get(t, notDue); f.ProcessStatus != flows.Active {
		t.Fatalf("flow not due: %s", f.ProcessStatus)
	}
	if err := b.inTx(func(tx pgx.Tx) error {
		_, err := b.decideTx(ctx, tx, b.caller.OrganizationID, due, true, flows.Evidence{})
		return err
	}); !errors.Is(err, flows.ErrNotActive) {
		t.Fatalf("deciding an expired flow: %v", err)
	}
	for flowID, want := range map[string]string{id: "flow.created:1,flow.opened:2,flow.accepted:3", due: "flow.created:1,flow.cancelled:2", notDue: "flow.created:1"} {
		if got := b.eventsOf(t, flowID); got != want {
			t.Errorf("events %s, want %s", got, want)
		}
	}
}

// TestLockTxHandsTheCallerTheLockedFlow: LockTx gives the caller the flow
// it decides on, locked until the caller's transaction ends, and records
// nothing: what the caller wrote in the transaction is its own to commit,
// and a flow locked and not recorded on stays as it was.
func TestLockTxHandsTheCallerTheLockedFlow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.create(t, newFlow("ID-777"))
	var seen flows.Locked
	err := b.inTx(func(tx pgx.Tx) (err error) {
		if seen, err = b.flows.LockTx(ctx, tx, b.caller.OrganizationID, c.FlowID, etag.Any); err != nil {
			return err
		}
		// Another transaction cannot take the flow while this one holds it;
		// the organization routes the lock to one shard on Citus.
		_, err = b.pool.Exec(ctx, `select 1 from flows where organization_id = $1 and id = $2 for update nowait`,
			b.caller.OrganizationID, c.FlowID)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			t.Errorf("locking the flow from another transaction = %v, want lock_not_available", err)
		}
		_, err = tx.Exec(ctx, `insert into test_events (kind, flow_id) values ('audit', $1)`, seen.Flow.ID)
		return err // commit the caller's write, and no decision
	})
	if err != nil {
		t.Fatal(err)
	}
	if f := seen.Flow; f.ID != c.FlowID || f.ReferenceID != c.ReferenceID || f.NationalID != "ID-777" || f.ProcessStatus != flows.Active ||
		len(f.Incidents) != 0 || seen.LastReceiptID != "" {
		t.Fatalf("LockTx gave %+v", seen)
	}
	if f := b.get(t, c.FlowID); f.ProcessStatus != flows.Active || f.Version != 1 {
		t.Fatalf("a lock without a decision changed the flow: %s version %d", f.ProcessStatus, f.Version)
	}
	if got := b.eventsOf(t, c.FlowID); got != "flow.created:1,audit:0" {
		t.Fatalf("events %s: want the caller's write and no decision", got)
	}
}

// TestLockTxReadsWhatADecisionNeeds: with the flow come its open incidents
// and its latest receipt's id, which a withdrawal's receipt names; an
// If-Match that no longer holds, or another organization, locks nothing.
func TestLockTxReadsWhatADecisionNeeds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.create(t, newFlow("ID-1")).FlowID
	lock := func(t *testing.T, organizationID string, cond etag.IfMatch) (flows.Locked, error) {
		t.Helper()
		var l flows.Locked
		err := b.inTx(func(tx pgx.Tx) (err error) {
			l, err = b.flows.LockTx(ctx, tx, organizationID, id, cond)
			return err
		})
		return l, err
	}
	tasks, err := b.flows.Tasks(ctx, b.caller, id)
	if err != nil {
		t.Fatal(err)
	}
	var delivery string
	for _, task := range tasks {
		if task.TaskType == flows.TaskSendInitiateWebhook {
			delivery = task.ID
		}
	}
	if err := b.reports.TaskFailing(ctx, b.caller.OrganizationID, delivery, "connection refused"); err != nil {
		t.Fatal(err)
	}
	l, err := lock(t, b.caller.OrganizationID, etag.Any)
	if err != nil || len(l.Flow.Incidents) != 1 || l.Flow.Incidents[0].TaskID != delivery || l.LastReceiptID != "" {
		t.Fatalf("LockTx = %+v, %v; want the open incident of task %s and no receipt", l, err, delivery)
	}
	if !reflect.DeepEqual(l.Flow.Incidents, b.get(t, id).Incidents) {
		t.Fatalf("LockTx's incidents %+v are not Get's", l.Flow.Incidents)
	}

	var decided flows.Flow
	accepted := receipt()
	if err := b.inTx(func(tx pgx.Tx) (err error) {
		if _, err = b.flows.LockTx(ctx, tx, b.caller.OrganizationID, id, etag.Any); err != nil {
			return err
		}
		decided, err = b.flows.RecordDecisionTx(ctx, tx, flows.Decision{OrganizationID: b.caller.OrganizationID, FlowID: id,
			Accepted: true, At: time.Now()}, accepted)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	l, err = lock(t, b.caller.OrganizationID, etag.Any)
	if err != nil || l.LastReceiptID != accepted.ID || l.Flow.Version != decided.Version {
		t.Fatalf("after the acceptance, LockTx = %+v, %v; want receipt %s", l, err, accepted.ID)
	}
	stale, err := etag.ParseIfMatch([]string{l.Flow.ETag()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock(t, b.caller.OrganizationID, stale); err != nil {
		t.Fatalf("LockTx with the current ETag: %v", err)
	}
	if _, err := b.withdraw(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := lock(t, b.caller.OrganizationID, stale); apperr.CodeOf(err) != apperr.PreconditionFailed {
		t.Fatalf("LockTx with the ETag before the withdrawal = %v, want PreconditionFailed", err)
	}
	withdrawn, err := lock(t, b.caller.OrganizationID, etag.Any)
	if err != nil || withdrawn.LastReceiptID == accepted.ID || withdrawn.LastReceiptID == "" || withdrawn.Flow.NumAttachments != 2 ||
		withdrawn.Flow.Version != decided.Version+1 {
		t.Fatalf("after the withdrawal, LockTx = %+v, %v; want the withdrawal's receipt", withdrawn, err)
	}
	if _, err := lock(t, "org-b", etag.Any); !errors.Is(err, flows.ErrNotFound) {
		t.Fatalf("LockTx of org-a's flow as org-b = %v, want ErrNotFound", err)
	}
}

// TestARecordKeepsOnlyAWholeReceipt: a decision or withdrawal handed over
// without its receipt's id or JWS is refused, and nothing is recorded.
func TestARecordKeepsOnlyAWholeReceipt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.create(t, newFlow("ID-1")).FlowID
	for _, r := range []flows.SignedReceipt{{ID: receipt().ID}, {JWS: receipt().JWS}, {ID: "not-an-id", JWS: receipt().JWS}} {
		err := b.inTx(func(tx pgx.Tx) error {
			_, err := b.flows.RecordDecisionTx(ctx, tx, flows.Decision{OrganizationID: b.caller.OrganizationID, FlowID: id,
				Accepted: true, At: time.Now()}, r)
			return err
		})
		if err == nil {
			t.Errorf("a decision with receipt %+v was recorded", r)
		}
		err = b.inTx(func(tx pgx.Tx) error {
			_, err := b.flows.RecordWithdrawalTx(ctx, tx, flows.Withdrawal{OrganizationID: b.caller.OrganizationID, FlowID: id,
				By: flows.ByOrganization, At: time.Now()}, r)
			return err
		})
		if err == nil {
			t.Errorf("a withdrawal with receipt %+v was recorded", r)
		}
	}
	if f := b.get(t, id); f.ProcessStatus != flows.Active || f.Version != 1 || f.NumAttachments != 0 {
		t.Fatalf("refused records changed the flow: %s version %d, %d receipts", f.ProcessStatus, f.Version, f.NumAttachments)
	}
	if got := b.eventsOf(t, id); got != "flow.created:1" {
		t.Fatalf("events %s", got)
	}
}

// TestRunExpiresUntilItsContextEnds: the maintenance loop expires due flows
// at every interval, and returns nil once its context ends.
func TestRunExpiresUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *flows.Config) { c.MaintenanceInterval = 20 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.flows.Run(ctx) }()

	c, err := b.flows.Create(context.Background(), b.caller, newFlow("ID-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(context.Background(), `update flows set expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	deadline := testwait.Deadline(t)
	for b.get(t, c.FlowID).ProcessStatus != flows.Cancelled {
		if time.Now().After(deadline) {
			t.Fatal("Run did not expire the flow")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil once its context ended", err)
		}
	case <-time.After(time.Until(testwait.Deadline(t))):
		t.Fatal("Run did not return after its context ended")
	}
	if logs := b.logs.String(); logs != "" {
		t.Fatalf("Run logged:\n%s", logs)
	}
}
