package flows_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/flows"
)

// leftovers counts the rows a create leaves.
func (b *bundle) leftovers(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("flows=%d tasks=%d consent=%d keys=%d events=%d",
		b.count(t, `select count(*) from flows`), b.count(t, `select count(*) from flow_tasks`),
		b.count(t, `select count(*) from consent_requests`), b.count(t, `select count(*) from flow_idempotency_keys`),
		b.count(t, `select count(*) from test_events`))
}

func TestIdempotencyKeyReplaysConflictsAndExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := newFlow("ID-12345")
	first, err := b.flows.Create(ctx, b.caller, in, "order-42")
	if err != nil || first.Replayed {
		t.Fatalf("first: %+v %v", first, err)
	}
	// The same request, with white space the create trims, replays the first result.
	spaced := in
	spaced.NationalID, spaced.LastName = " ID-12345", "Nordmann\t"
	again, err := b.flows.Create(ctx, b.caller, spaced, "order-42")
	if want := (flows.Created{FlowID: first.FlowID, ReferenceID: first.ReferenceID, ConsentURL: first.ConsentURL, Replayed: true}); err != nil || again != want {
		t.Fatalf("replay: %+v %v, want %+v", again, err, want)
	}
	// Another request with the same key is refused; so is the same request
	// from another client of the organization.
	other := in
	other.LastName = "Other"
	otherClient := b.caller
	otherClient.ClientID = "client-a2"
	for name, try := range map[string]func() error{
		"another request": func() error { _, err := b.flows.Create(ctx, b.caller, other, "order-42"); return err },
		"another client":  func() error { _, err := b.flows.Create(ctx, otherClient, in, "order-42"); return err },
	} {
		if err := try(); apperr.CodeOf(err) != apperr.IdempotencyMismatch {
			t.Fatalf("%s with the same key: %v, want %s", name, err, apperr.IdempotencyMismatch)
		}
	}
	// Keys belong to one organization.
	orgB := flows.Caller{OrganizationID: "org-b", ClientID: "client-b"}
	if c, err := b.flows.Create(ctx, orgB, in, "order-42"); err != nil || c.Replayed || c.FlowID == first.FlowID {
		t.Fatalf("B with A's key: %+v %v", c, err)
	}
	if got := b.leftovers(t); got != "flows=2 tasks=4 consent=2 keys=2 events=2" {
		t.Fatalf("rows: %s", got)
	}

	// Concurrent creates with one key create one flow and all answer it.
	var (
		mu       sync.Mutex
		ids      = map[string]int{}
		replayed int
		wg       sync.WaitGroup
	)
	for range 12 {
		wg.Go(func() {
			c, err := b.flows.Create(ctx, b.caller, newFlow("SAME"), "race")
			if err != nil {
				t.Errorf("concurrent: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[c.FlowID]++
			if c.Replayed {
				replayed++
			}
		})
	}
	wg.Wait()
	if len(ids) != 1 || replayed != 11 {
		t.Fatalf("concurrent same-key creates: flows %v, %d replayed", ids, replayed)
	}

	// After 24 hours the key is free again, and expired keys are purged.
	if _, err := b.pool.Exec(ctx, `update flow_idempotency_keys set expires_at = now() - interval '1 second'
		where key = 'order-42' and organization_id = $1`, b.caller.OrganizationID); err != nil {
		t.Fatal(err)
	}
	if c, err := b.flows.Create(ctx, b.caller, other, "order-42"); err != nil || c.Replayed || c.FlowID == first.FlowID {
		t.Fatalf("expired key: %+v %v", c, err)
	}
	if _, err := b.pool.Exec(ctx, `update flow_idempotency_keys set expires_at = now() - interval '1 second' where key = 'race'`); err != nil {
		t.Fatal(err)
	}
	if n, err := b.flows.PurgeExpiredKeys(ctx); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if n := b.count(t, `select count(*) from flow_idempotency_keys`); n != 2 {
		t.Fatalf("%d keys left, want 2", n)
	}
}

// TestAReplayAnswersAfterTheFlowWasDeleted: within its 24 hours a key
// replays the first result even when the flow is gone, as Stripe's keys do;
// another request with the key is still refused.
func TestAReplayAnswersAfterTheFlowWasDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := newFlow("ID-12345")
	first, err := b.flows.Create(ctx, b.caller, in, "delete-me")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.flows.Delete(ctx, b.caller, first.FlowID, etag.Any); err != nil {
		t.Fatal(err)
	}
	again, err := b.flows.Create(ctx, b.caller, in, "delete-me")
	if want := (flows.Created{FlowID: first.FlowID, ReferenceID: first.ReferenceID, ConsentURL: first.ConsentURL, Replayed: true}); err != nil || again != want {
		t.Fatalf("replay after delete: %+v %v, want %+v", again, err, want)
	}
	other := in
	other.ReferenceName = "Another loan"
	if _, err := b.flows.Create(ctx, b.caller, other, "delete-me"); apperr.CodeOf(err) != apperr.IdempotencyMismatch {
		t.Fatalf("another request after delete: %v, want %s", err, apperr.IdempotencyMismatch)
	}
	if n := b.count(t, `select count(*) from flows`); n != 0 {
		t.Fatalf("the replay made %d flows", n)
	}
}
