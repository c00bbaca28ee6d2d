package webhooks_test

import (
	"context"
	"testing"

	"github.com/flowd/flowd/modules/webhooks"
)

// TestEventsFanOutToSubscribedEndpoints: besides the flow's own webhookUrl,
// every enabled endpoint of the organization that subscribes to an event's
// type receives it, each delivery under the event's webhook-id and signed
// so that the Standard Webhooks library verifies it; a disabled endpoint, an
// unsubscribed one and another organization's receive nothing.
func TestEventsFanOutToSubscribedEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	endpoints := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	own, all, accepted, disabled, other := newReceiver(t, b.secret), newReceiver(t, b.secret), newReceiver(t, b.secret),
		newReceiver(t), newReceiver(t)
	for _, ep := range []struct {
		org     string
		rcv     *receiver
		enabled bool
		types   []webhooks.EventType
	}{
		{b.org, all, true, nil},
		{b.org, accepted, true, []webhooks.EventType{webhooks.FlowAccepted}},
		{b.org, disabled, false, nil},
		{"org-2", other, true, nil},
	} {
		if _, err := endpoints.Create(ctx, ep.org, webhooks.NewEndpoint{URL: ep.rcv.URL(), Enabled: ep.enabled, EventTypes: ep.types}); err != nil {
			t.Fatal(err)
		}
	}

	created := b.event(webhooks.FlowCreated, "flow-1", own.URL())
	created.Sequence = 1
	acc := b.event(webhooks.FlowAccepted, "flow-1", own.URL())
	acc.Sequence = 2
	publish(t, b.pool, b.hooks, created, acc)
	withoutURL := b.event(webhooks.FlowCreated, "flow-2", "")
	withoutURL.Sequence = 1
	publish(t, b.pool, b.hooks, withoutURL)

	eventually(t, "every delivery", func() bool {
		return len(own.Deliveries()) == 2 && len(all.Deliveries()) == 3 && len(accepted.Deliveries()) == 1
	})
	accID := eventID(t, b.pool, "flow-1", webhooks.FlowAccepted)
	for name, r := range map[string]*receiver{"own": own, "all": all, "accepted": accepted} {
		if r.count(accID, 200, 300) != 1 {
			t.Errorf("%s: the acceptance under webhook-id %s arrived %d times", name, accID, r.count(accID, 200, 300))
		}
	}
	if d := accepted.Deliveries()[0]; d.Payload.Type != "flow.accepted" || d.Payload.Data["sequence"] != 2.0 {
		t.Errorf("the subscriber of flow.accepted got %+v", d.Payload)
	}
	if n := disabled.Arrived() + other.Arrived(); n != 0 {
		t.Errorf("a disabled endpoint and another organization's got %d deliveries", n)
	}
	// The event shows a delivery per destination, each delivered at its
	// first attempt once the workers have recorded it.
	var deliveries []webhooks.Delivery
	eventually(t, "three deliveries recorded", func() bool {
		var err error
		_, deliveries, err = b.hooks.Event(ctx, b.org, accID)
		if err != nil || len(deliveries) != 3 {
			return false
		}
		for _, d := range deliveries {
			if d.State != "delivered" {
				return false
			}
		}
		return true
	})
	for _, d := range deliveries {
		if len(d.Attempts) != 1 {
			t.Errorf("delivery to %s: %d attempts, want 1", d.URL, len(d.Attempts))
		}
	}
}
