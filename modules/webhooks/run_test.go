package webhooks_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/webhooks"
)

// runUntilCancelled runs the module's workers; cancel ends Run's context and
// done receives what Run returned.
func runUntilCancelled(b *bundle) (cancel func(), done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- b.hooks.Run(ctx) }()
	return cancel, ch
}

// holdingReceiver is a receiver that holds every delivery until release is
// called (at cleanup at the latest), then answers 200.
func holdingReceiver(t *testing.T, secret string) (rcv *receiver, release func()) {
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	rcv = newReceiver(t, secret)
	t.Cleanup(release) // before the receiver closes, which waits for its handlers
	rcv.respond = func(delivery, int) int {
		<-gate
		return http.StatusOK
	}
	return rcv, release
}

// TestRunDrainsInFlightDeliveries: when Run's context ends during a
// delivery, Run waits for it; once Run has returned the delivery is
// recorded, its job completed and its task reported.
func TestRunDrainsInFlightDeliveries(t *testing.T) {
	t.Parallel()
	b := newBundle(t, newPool(t))
	rcv, release := holdingReceiver(t, b.secret)
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowAccepted, "flow-1", rcv.URL()))
	id := eventID(t, b.pool, "flow-1", webhooks.FlowAccepted)
	cancel, done := runUntilCancelled(b)
	defer cancel()
	eventually(t, "the delivery under way", func() bool { return rcv.Arrived() == 1 })

	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while a delivery was in flight", err)
	case <-time.After(500 * time.Millisecond):
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(time.Until(testwait.Deadline(t))):
		t.Fatal("Run did not return after the delivery in flight finished")
	}
	if s := eventState(t, b.pool, id); s != "delivered" {
		t.Errorf("event state after Run = %s, want delivered", s)
	}
	if s := jobState(t, b.pool, id); s != "completed" {
		t.Errorf("job state after Run = %s, want completed", s)
	}
	if calls := b.reporter.Calls(); len(calls) != 1 || calls[0] != "succeeded org-1/task-flow-1" {
		t.Errorf("reporter calls after Run = %q, want the task succeeded", calls)
	}
}

// TestRunCancelsDeliveriesAfterDrainTimeout: a delivery still in flight when
// the drain timeout passes is cancelled, Run returns, and the event stays
// pending for a retry, with no attempt recorded against the receiver.
func TestRunCancelsDeliveriesAfterDrainTimeout(t *testing.T) {
	t.Parallel()
	b := newBundle(t, newPool(t), func(o *webhooks.Options) { o.DrainTimeout = 200 * time.Millisecond })
	rcv, _ := holdingReceiver(t, b.secret)
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowOpened, "flow-1", rcv.URL()))
	id := eventID(t, b.pool, "flow-1", webhooks.FlowOpened)
	cancel, done := runUntilCancelled(b)
	defer cancel()
	eventually(t, "the delivery under way", func() bool { return rcv.Arrived() == 1 })

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(time.Until(testwait.Deadline(t))):
		t.Fatal("Run did not return after its drain timeout")
	}
	if s := eventState(t, b.pool, id); s != "pending" {
		t.Errorf("event state = %s, want pending (retried later)", s)
	}
	if attempts, _ := b.hooks.Attempts(context.Background(), b.org, "flow-1"); len(attempts) != 0 {
		t.Errorf("attempts = %+v, want none for a delivery cancelled by the stop", attempts)
	}
	if calls := b.reporter.Calls(); len(calls) != 0 {
		t.Errorf("reporter calls = %q, want none", calls)
	}
}
