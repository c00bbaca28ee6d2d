package webhooks_test

import (
	"context"
	"testing"

	"github.com/flowd/flowd/modules/webhooks"
)

// TestThrottledEndpointDoesNotSlowOthers: an endpoint throttled to two
// deliveries a second receives its backlog at its pace, each delivery in
// one attempt (waiting for its turn is not one) and none lost, while an
// unthrottled endpoint receives the same events without waiting for it.
func TestThrottledEndpointDoesNotSlowOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	endpoints := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	small, other := newReceiver(t, b.secret), newReceiver(t, b.secret)
	throttled, err := endpoints.Create(ctx, b.org, webhooks.NewEndpoint{URL: small.URL(), Enabled: true, RateLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if throttled.RateLimit != 2 {
		t.Fatalf("the endpoint's rate limit is %d, want 2", throttled.RateLimit)
	}
	if _, err := endpoints.Create(ctx, b.org, webhooks.NewEndpoint{URL: other.URL(), Enabled: true}); err != nil {
		t.Fatal(err)
	}
	const n = 12
	evs := make([]webhooks.Event, n)
	for i := range evs {
		evs[i] = b.event(webhooks.FlowCreated, "flow-"+string(rune('a'+i)), "")
		evs[i].Sequence = 1
	}
	publish(t, b.pool, b.hooks, evs...)

	// The throttle spaces the small receiver's deliveries half a second
	// apart: the last of them cannot go before 5.5 s have passed, long
	// after the other endpoint has all of them.
	eventually(t, "the other endpoint's deliveries", func() bool { return len(other.Deliveries()) == n })
	if got := len(small.Deliveries()); got >= n {
		t.Errorf("the throttled endpoint had all %d deliveries by the time the other had its own", got)
	}
	eventually(t, "the throttled endpoint's deliveries", func() bool { return len(small.Deliveries()) == n })
	// Received is not yet recorded: wait for every outcome in the database.
	var attempts, delivered int
	eventually(t, "the throttled endpoint's deliveries recorded", func() bool {
		if err := b.pool.QueryRow(ctx, `select count(a.*), count(distinct e.id) filter (where e.state = 'delivered')
			from webhook_events e left join webhook_attempts a on a.organization_id = e.organization_id and a.event_id = e.id
			where e.organization_id = $1 and e.endpoint_id = $2`, b.org, throttled.ID).Scan(&attempts, &delivered); err != nil {
			t.Fatal(err)
		}
		return delivered == n
	})
	if attempts != n {
		t.Errorf("the throttled endpoint: %d deliveries delivered in %d attempts, want %d in %d", delivered, attempts, n, n)
	}
	ids := map[string]bool{}
	for _, d := range small.Deliveries() {
		ids[d.ID] = true
	}
	if len(ids) != n {
		t.Errorf("the throttled endpoint received %d distinct events, want %d", len(ids), n)
	}
}
