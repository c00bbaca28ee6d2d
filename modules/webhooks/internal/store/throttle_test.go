package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// TestTakeSlotSpacesDeliveries: the throttle hands an endpoint's deliveries
// slots one interval apart from now, whatever the order they ask in, keeps
// a slot to come on the delivery, and starts again from now once it has
// been idle. The clock is the test's.
func TestTakeSlotSpacesDeliveries(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	const org, endpoint = "org-1", "01970c7d-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	if _, err := pool.Exec(ctx, `insert into webhook_endpoints (organization_id, id, url, description, event_types, enabled, rate_limit)
		values ($1, $2, 'https://hooks.example/a', '', '{}', true, 4)`, org, endpoint); err != nil {
		t.Fatal(err)
	}
	ids := []string{"01970c7d-0000-7000-8000-000000000001", "01970c7d-0000-7000-8000-000000000002",
		"01970c7d-0000-7000-8000-000000000003", "01970c7d-0000-7000-8000-000000000004"}
	for _, id := range ids {
		if _, err := pool.Exec(ctx, `insert into webhook_events (id, organization_id, flow_id, type, url, body, job_id, event_id, endpoint_id)
			values ($1, $2, 'flow-1', 'flow.created', 'https://hooks.example/a', '{}', 0, $1, $3)`, id, org, endpoint); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	interval := 250 * time.Millisecond
	for i, id := range ids {
		slot, err := store.TakeSlot(ctx, pool, org, endpoint, id, now, interval)
		if err != nil {
			t.Fatal(err)
		}
		if want := now.Add(time.Duration(i) * interval); !slot.Equal(want) {
			t.Errorf("slot %d: %s, want %s", i, slot.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
		p, err := policyOf(ctx, pool, org, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case p.RateLimit != 4:
			t.Errorf("delivery %d: rate limit %d, want 4", i, p.RateLimit)
		case i == 0 && p.Slot != nil:
			t.Errorf("the first delivery keeps a slot (%s) though it is its turn now", p.Slot)
		case i > 0 && (p.Slot == nil || !p.Slot.Equal(slot)):
			t.Errorf("delivery %d keeps slot %v, want %s", i, p.Slot, slot)
		}
	}
	if err := store.UseSlot(ctx, pool, org, ids[1]); err != nil {
		t.Fatal(err)
	}
	if p, err := policyOf(ctx, pool, org, ids[1]); err != nil || p.Slot != nil {
		t.Errorf("a used slot stays: %v %v", p.Slot, err)
	}
	// Idle for a while: the next delivery goes at once, the one after it
	// an interval later.
	later := now.Add(time.Minute)
	for i, want := range []time.Time{later, later.Add(interval)} {
		slot, err := store.TakeSlot(ctx, pool, org, endpoint, ids[i], later, interval)
		if err != nil {
			t.Fatal(err)
		}
		if !slot.Equal(want) {
			t.Errorf("after a pause, slot %d: %s, want %s", i, slot.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
	}
}

// policyOf is the policy a delivery's worker reads with it.
func policyOf(ctx context.Context, db database.Querier, org, id string) (store.Policy, error) {
	ev, _, err := store.GetEventAndSecrets(ctx, db, org, id)
	return ev.Policy, err
}
