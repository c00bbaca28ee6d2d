package flows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/testwait"
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
	pass := func(flows.Flow, time.Time) (flows.Evidence, error) { return flows.Evidence{}, nil }
	if err := b.inTx(func(tx pgx.Tx) (err error) {
		f, err = b.flows.DecideTx(ctx, tx, b.caller.OrganizationID, id, true, pass)
		return
	}); err != nil {
		t.Fatal(err)
	}
	if f.ConsentStatus != flows.Accepted || f.ProcessStatus != flows.Completed || f.Version != 3 || f.DecidedAt == nil || f.OpenedAt == nil {
		t.Fatalf("decided: %+v", f)
	}
	if got := b.get(t, id); got.ConsentStatus != flows.Accepted || got.Version != 3 || !got.UpdatedAt.Equal(f.UpdatedAt) || got.DecidedAt == nil {
		t.Fatalf("decided, as stored: %+v; DecideTx said %+v", got, f)
	}
	if err := b.inTx(func(tx pgx.Tx) error {
		_, err := b.flows.DecideTx(ctx, tx, b.caller.OrganizationID, id, false, pass)
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
			_, err := b.flows.DecideTx(ctx, tx, b.caller.OrganizationID, unknown, true, pass)
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
		_, err := b.flows.DecideTx(ctx, tx, b.caller.OrganizationID, due, true, pass)
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

// TestDecideTxHandsTheLockedFlowToItsCheck: the check sees the flow it
// decides, and its error is DecideTx's with nothing recorded, while what
// the check wrote in the transaction is the caller's to commit.
func TestDecideTxHandsTheLockedFlowToItsCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.create(t, newFlow("ID-777"))
	refused := errors.New("the wrong person")
	var seen flows.Flow
	err := b.inTx(func(tx pgx.Tx) error {
		_, err := b.flows.DecideTx(ctx, tx, b.caller.OrganizationID, c.FlowID, true, func(f flows.Flow, _ time.Time) (flows.Evidence, error) {
			seen = f
			_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id) values ('audit', $1)`, f.ID)
			if err != nil {
				return flows.Evidence{}, err
			}
			return flows.Evidence{}, refused
		})
		if !errors.Is(err, refused) {
			t.Errorf("DecideTx with a refusing check = %v, want its error", err)
		}
		return nil // commit what the check wrote
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen.ID != c.FlowID || seen.ReferenceID != c.ReferenceID || seen.NationalID != "ID-777" || seen.ProcessStatus != flows.Active {
		t.Fatalf("the check saw %+v", seen)
	}
	if f := b.get(t, c.FlowID); f.ProcessStatus != flows.Active || f.Version != 1 {
		t.Fatalf("a refused decision changed the flow: %s version %d", f.ProcessStatus, f.Version)
	}
	if got := b.eventsOf(t, c.FlowID); got != "flow.created:1,audit:0" {
		t.Fatalf("events %s: want the check's write and no decision", got)
	}
}

// TestRunExpiresAndPurgesUntilItsContextEnds: the maintenance loop expires
// due flows and purges expired idempotency keys at every interval, and
// returns nil once its context ends.
func TestRunExpiresAndPurgesUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *flows.Config) { c.MaintenanceInterval = 20 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.flows.Run(ctx) }()

	c, err := b.flows.Create(context.Background(), b.caller, newFlow("ID-1"), "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(context.Background(), `update flows set expires_at = now() - interval '1 second';
		update flow_idempotency_keys set expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	deadline := testwait.Deadline(t)
	for b.get(t, c.FlowID).ProcessStatus != flows.Cancelled || b.count(t, `select count(*) from flow_idempotency_keys`) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run neither expired the flow nor purged its key")
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
