package webhooks_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/webhooks"
)

// publishFlows publishes, in one transaction each, the events of flows
// prefix-0 … prefix-(n-1) of type typ to the organization's endpoints, and
// returns their ids.
func (b *bundle) publishFlows(t *testing.T, prefix string, n int, typ webhooks.EventType) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		flow := fmt.Sprintf("%s-%d", prefix, i)
		ev := b.event(typ, flow, "")
		ev.Sequence = 1
		publish(t, b.pool, b.hooks, ev)
		ids[i] = eventID(t, b.pool, flow, typ)
	}
	return ids
}

// succeeded counts the deliveries the receiver answered with a 2xx, by webhook-id.
func (r *receiver) succeeded() map[string]int {
	out := map[string]int{}
	for _, d := range r.Deliveries() {
		if d.Status >= 200 && d.Status < 300 {
			out[d.ID]++
		}
	}
	return out
}

// awaitRecovery waits for a recovery to finish and returns it.
func (b *bundle) awaitRecovery(t *testing.T, r webhooks.Recovery) webhooks.Recovery {
	t.Helper()
	eventually(t, "the recovery to finish", func() bool {
		var got webhooks.Recovery
		var err error
		if r.EndpointID == "" {
			got, err = b.hooks.FlowURLRecovery(context.Background(), b.org, r.ID)
		} else {
			got, err = b.hooks.Recovery(context.Background(), b.org, r.EndpointID, r.ID)
		}
		if err == nil {
			r = got
		}
		return err == nil && !r.State.Active()
	})
	return r
}

// wantOnce fails unless each of ids arrived once, and nothing else did but
// what also lists.
func wantOnce(t *testing.T, got map[string]int, ids []string, also ...string) {
	t.Helper()
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("event %s arrived %d times, want once", id, got[id])
		}
	}
	for id, n := range got {
		if !slices.Contains(ids, id) && !slices.Contains(also, id) {
			t.Errorf("event %s arrived %d times, want never", id, n)
		}
	}
}

// TestRecoveryBringsWhatADisabledEndpointMissed: events published while an
// endpoint was disabled have no delivery to it; once it is enabled again, a
// recovery from the time it was disabled sends it each one of its types
// once (flow.deleted too, but not the events of the deleted flow), and
// neither what it received before nor the types it does not take. An
// endpoint made after those events gets none of them.
func TestRecoveryBringsWhatADisabledEndpointMissed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) { o.HostConcurrency = 100 })
	ctx := context.Background()
	rcv := newReceiver(t, b.secret)
	ep := b.createEndpoint(t, rcv, true, webhooks.FlowCreated, webhooks.FlowAccepted, webhooks.FlowDeleted)
	before := b.publishFlows(t, "before", 3, webhooks.FlowCreated)
	eventually(t, "the events before the outage to arrive", func() bool { return len(rcv.succeeded()) == len(before) })

	off, err := b.endpoints().Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Enabled: ptr(false)}, etag.Any)
	if err != nil || off.DisabledAt == nil {
		t.Fatalf("disabled: %+v %v, want its DisabledAt", off, err)
	}
	const n = 40
	missed := slices.Concat(b.publishFlows(t, "created", n, webhooks.FlowCreated), b.publishFlows(t, "accepted", n, webhooks.FlowAccepted))
	opened := b.publishFlows(t, "opened", 5, webhooks.FlowOpened) // a type it does not take
	gone := b.publishFlows(t, "gone", 1, webhooks.FlowCreated)
	deleted := b.event(webhooks.FlowDeleted, "gone-0", "")
	deleted.Sequence = 2
	publish(t, b.pool, b.hooks, deleted)
	missed = append(missed, eventID(t, b.pool, "gone-0", webhooks.FlowDeleted))
	if got := deliveriesTo(t, b.pool, ep.ID); len(got) != len(before) {
		t.Fatalf("%d deliveries to the endpoint, want only the %d before it was disabled", len(got), len(before))
	}

	on, err := b.endpoints().Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Enabled: ptr(true)}, etag.Any)
	if err != nil || on.DisabledAt != nil {
		t.Fatalf("enabled: %+v %v, want no DisabledAt", on, err)
	}
	r, err := b.hooks.Recover(ctx, b.org, ep.ID, *off.DisabledAt, "staff:ada")
	if err != nil {
		t.Fatal(err)
	}
	if r.Total != len(missed) {
		t.Errorf("the recovery covers %d events, want the %d missed", r.Total, len(missed))
	}
	r = b.awaitRecovery(t, r)
	if r.State != webhooks.RecoveryDone || r.Scheduled != len(missed) {
		t.Fatalf("finished %+v, want done with %d sent", r, len(missed))
	}
	eventually(t, "every missed event to arrive", func() bool { return len(rcv.succeeded()) >= len(before)+len(missed) })
	wantOnce(t, rcv.succeeded(), slices.Concat(before, missed))
	for _, id := range slices.Concat(opened, gone) {
		if rcv.succeeded()[id] != 0 {
			t.Errorf("event %s arrived: a type the endpoint does not take, or of a deleted flow", id)
		}
	}

	late := newReceiver(t, b.secret)
	lateEp := b.createEndpoint(t, late, true)
	r, err = b.hooks.Recover(ctx, b.org, lateEp.ID, *off.DisabledAt, "staff:ada")
	if err != nil {
		t.Fatal(err)
	}
	if r = b.awaitRecovery(t, r); r.Total != 0 || r.Scheduled != 0 || late.Arrived() != 0 {
		t.Errorf("an endpoint made after the events: %+v, %d arrived; want nothing", r, late.Arrived())
	}
}

// TestRecoveryAfterFlowdDisabledAnEndpoint: flowd disables an endpoint
// whose deliveries kept failing; the events of the time it was disabled
// have no delivery to it. Once its receiver is back and it is enabled, a
// recovery from MissedSince (the retry schedule before it began failing)
// sends every event it missed once: those that failed and those of the
// disabled window.
func TestRecoveryAfterFlowdDisabledAnEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) {
		o.DisableAfter = time.Second
		o.Schedule = slices.Repeat([]time.Duration{100 * time.Millisecond}, 40)
		o.HostConcurrency = 100
	})
	ctx := context.Background()
	rcv, status := failingReceiver(t, b.secret)
	ep := b.createEndpoint(t, rcv, true)
	failed := b.publishFlows(t, "failed", 3, webhooks.FlowCreated)
	var off webhooks.Endpoint
	eventually(t, "flowd to disable the endpoint", func() bool {
		got, err := b.endpoints().Get(ctx, b.org, ep.ID)
		off = got
		return err == nil && !got.Enabled
	})
	if off.DisabledAt == nil || off.FailingSince == nil || off.DisabledReason == "" {
		t.Fatalf("disabled by flowd: %+v, want its DisabledAt, FailingSince and reason", off)
	}
	window := b.publishFlows(t, "window", 25, webhooks.FlowCreated)

	status.Store(http.StatusOK)
	if _, err := b.endpoints().Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Enabled: ptr(true)}, etag.Any); err != nil {
		t.Fatal(err)
	}
	since, clamped := b.hooks.MissedSince(off, time.Now())
	if want := off.FailingSince.Add(-4 * time.Second); !since.Equal(want) || clamped {
		t.Errorf("MissedSince = %s (clamped %v), want failingSince less the retry schedule, %s", since, clamped, want)
	}
	r, err := b.hooks.Recover(ctx, b.org, ep.ID, since, "client:test")
	if err != nil {
		t.Fatal(err)
	}
	r = b.awaitRecovery(t, r)
	// Its own endpoint.disabled is an event of its types it did not receive.
	missed := slices.Concat(failed, window)
	var disabledEvent string
	if err := b.pool.QueryRow(ctx, `select id::text from events where type = 'endpoint.disabled'`).Scan(&disabledEvent); err != nil {
		t.Fatal(err)
	}
	if r.State != webhooks.RecoveryDone || r.Scheduled != len(missed)+1 {
		t.Fatalf("finished %+v, want done with %d sent", r, len(missed)+1)
	}
	eventually(t, "every missed event to arrive", func() bool { return len(rcv.succeeded()) >= len(missed)+1 })
	wantOnce(t, rcv.succeeded(), append(missed, disabledEvent))
}

// TestRecoveryOverlappingRedeliveriesMakesOneDeliveryEach: while a
// recovery adds the deliveries an endpoint missed, batch after batch,
// redeliveries of half of the same events to the endpoint run at once.
// Each event ends with one delivery to the endpoint, with one job, whoever
// made it.
func TestRecoveryOverlappingRedeliveriesMakesOneDeliveryEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBundle(t, dbtest.New(t), func(o *webhooks.Options) { o.RecoveryBatch = 20 })
	ep := b.newEndpoint(t, "http://127.0.0.1:9/hooks")
	off, err := b.endpoints().Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Enabled: ptr(false)}, etag.Any)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	missed := b.publishFlows(t, "missed", n, webhooks.FlowCreated)
	if _, err := b.endpoints().Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Enabled: ptr(true)}, etag.Any); err != nil {
		t.Fatal(err)
	}
	r, err := b.hooks.Recover(ctx, b.org, ep.ID, *off.DisabledAt, "staff:ada")
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for more := true; more; {
			if more, err = b.hooks.RecoverBatch(ctx, b.org, r.ID); err != nil {
				t.Errorf("a batch: %v", err)
				return
			}
		}
	}()
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The even events: each by one of the three, and by the
			// recovery; the odd ones by the recovery alone.
			for i := 2 * w; i < n; i += 6 {
				if _, err := b.hooks.Redeliver(ctx, b.org, missed[i], ep.ID); err != nil && !errors.Is(err, webhooks.ErrNothingToRedeliver) {
					t.Errorf("redeliver %s: %v", missed[i], err)
				}
			}
		}()
	}
	wg.Wait()
	rows, err := b.pool.Query(ctx, `select event_id::text, count(*)::int, count(distinct job_id)::int, bool_and(job_id <> 0)
		from webhook_events where endpoint_id = $1 group by event_id`, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var id string
		var deliveries, jobs int
		var withJob bool
		if err := rows.Scan(&id, &deliveries, &jobs, &withJob); err != nil {
			t.Fatal(err)
		}
		seen++
		if deliveries != 1 || jobs != 1 || !withJob {
			t.Errorf("event %s: %d deliveries with %d jobs (all with one: %v), want one with its job", id, deliveries, jobs, withJob)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != n {
		t.Errorf("%d of %d missed events have a delivery to the endpoint", seen, n)
	}
}

// TestRecoveryOverlappingLiveDeliveriesSendsNoDuplicate: a recovery from
// before an endpoint was disabled runs while fresh events keep coming and
// while deliveries whose first attempt failed wait for their retry. Every
// event, delivered before, missed, retried or fresh, reaches the receiver
// once.
func TestRecoveryOverlappingLiveDeliveriesSendsNoDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) {
		o.HostConcurrency, o.RecoveryBatch = 100, 10
		// The retries come due about when the recovery starts.
		o.Schedule = slices.Repeat([]time.Duration{2 * time.Second}, 5)
	})
	ctx := context.Background()
	rcv := newReceiver(t, b.secret)
	rcv.respond = func(d delivery, nth int) int {
		if flow, _ := d.Payload.Data["flowId"].(string); strings.HasPrefix(flow, "retried-") && nth == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	ep := b.createEndpoint(t, rcv, true)
	since := time.Now()
	delivered := b.publishFlows(t, "delivered", 5, webhooks.FlowCreated)
	eventually(t, "the first events to arrive", func() bool { return len(rcv.succeeded()) == len(delivered) })
	if _, err := b.endpoints().Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Enabled: ptr(false)}, etag.Any); err != nil {
		t.Fatal(err)
	}
	missed := b.publishFlows(t, "missed", 60, webhooks.FlowCreated)
	if _, err := b.endpoints().Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Enabled: ptr(true)}, etag.Any); err != nil {
		t.Fatal(err)
	}
	retried := b.publishFlows(t, "retried", 10, webhooks.FlowCreated)
	r, err := b.hooks.Recover(ctx, b.org, ep.ID, since, "staff:ada")
	if err != nil {
		t.Fatal(err)
	}
	// Fresh events until the recovery has finished.
	var fresh []string
	for i := 0; ; i++ {
		fresh = append(fresh, b.publishFlows(t, fmt.Sprintf("fresh%d", i), 1, webhooks.FlowCreated)...)
		got, err := b.hooks.Recovery(ctx, b.org, ep.ID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.State.Active() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	all := slices.Concat(delivered, missed, retried, fresh)
	eventually(t, "every event to arrive", func() bool { return len(rcv.succeeded()) >= len(all) })
	eventually(t, "no delivery to the endpoint pending", func() bool { return finished(deliveriesTo(t, b.pool, ep.ID)) })
	wantOnce(t, rcv.succeeded(), all)
}

// TestRecoveryOfTheFlowsURLs: deliveries to flows' own webhook URLs that
// failed for good (their retries used up) are sent again in bulk, those of
// one host only when the recovery names it, each once, with their tasks
// reported done; deliveries to other hosts, to endpoints, delivered ones
// and those of a deleted flow are left alone.
func TestRecoveryOfTheFlowsURLs(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) { o.HostConcurrency, o.RecoveryBatch = 100, 7 })
	ctx := context.Background()
	rcv, status := failingReceiver(t, b.secret)
	other, otherStatus := failingReceiver(t, b.secret)
	endpoint := b.createEndpoint(t, newReceiver(t, b.secret), true, webhooks.FlowAccepted)
	since := time.Now()
	var failed, elsewhere []string
	for i := range 20 {
		flow := fmt.Sprintf("flow-%d", i)
		publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, flow, rcv.URL()))
		failed = append(failed, eventID(t, b.pool, flow, webhooks.FlowCreated))
		flow = fmt.Sprintf("other-%d", i)
		publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, flow, other.URL()))
		elsewhere = append(elsewhere, eventID(t, b.pool, flow, webhooks.FlowCreated))
	}
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, "gone", rcv.URL()))
	eventually(t, "every delivery to fail for good", func() bool {
		return states(t, b.pool, slices.Concat(failed, elsewhere))["failed"] == len(failed)+len(elsewhere) &&
			eventState(t, b.pool, eventID(t, b.pool, "gone", webhooks.FlowCreated)) == "failed"
	})
	deleted := b.event(webhooks.FlowDeleted, "gone", "")
	deleted.Sequence, deleted.TaskID = 4, ""
	publish(t, b.pool, b.hooks, deleted)
	status.Store(http.StatusOK)
	otherStatus.Store(http.StatusOK)
	host := strings.TrimPrefix(strings.Split(rcv.URL(), "/hooks")[0], "http://")

	for _, c := range []struct {
		name, host string
		since      time.Time
		fields     []string
	}{
		{"no since", host, time.Time{}, []string{"since"}},
		{"since past what is kept", host, time.Now().Add(-31 * 24 * time.Hour), []string{"since"}},
		{"a URL for a host", "http://" + host + "/hooks", since, []string{"host"}},
		{"both", "a b", time.Now().Add(time.Hour), []string{"since", "host"}},
	} {
		if _, err := b.hooks.RecoverFlowURLs(ctx, b.org, c.since, c.host, "client:test"); !slices.Equal(fieldsOf(err), c.fields) {
			t.Errorf("%s: %v, want an Invalid error naming %v", c.name, err, c.fields)
		}
	}
	r, err := b.hooks.RecoverFlowURLs(ctx, b.org, since, strings.ToUpper(host), "client:test")
	if err != nil {
		t.Fatal(err)
	}
	if r.EndpointID != "" || r.Host != host || r.Total != len(failed) || r.State != webhooks.RecoveryQueued {
		t.Fatalf("requested %+v, want one of %s covering %d", r, host, len(failed))
	}
	if _, err := b.hooks.RecoverFlowURLs(ctx, b.org, since, "", "client:test"); !errors.Is(err, webhooks.ErrRecoveryRunning) {
		t.Fatalf("a second recovery of the flows' URLs: %v, want ErrRecoveryRunning", err)
	}
	r = b.awaitRecovery(t, r)
	if r.State != webhooks.RecoveryDone || r.Scheduled != len(failed) {
		t.Fatalf("finished %+v, want done with %d sent", r, len(failed))
	}
	eventually(t, "the failed deliveries to arrive", func() bool { return len(rcv.succeeded()) >= len(failed) })
	wantOnce(t, rcv.succeeded(), failed)
	if n := len(other.succeeded()); n != 0 {
		t.Errorf("%d deliveries to another host arrived", n)
	}
	eventually(t, "every task reported done", func() bool {
		for i := range failed {
			if !b.reporter.has(fmt.Sprintf("succeeded %s/task-flow-%d", b.org, i)) {
				return false
			}
		}
		return true
	})
	if got := deliveriesTo(t, b.pool, endpoint.ID); len(got) != 0 {
		t.Errorf("%d deliveries to an endpoint", len(got))
	}

	// Every host, now that the first recovery has finished.
	r, err = b.hooks.RecoverFlowURLs(ctx, b.org, since, "", "staff:ada")
	if err != nil {
		t.Fatal(err)
	}
	if r = b.awaitRecovery(t, r); r.Scheduled != len(elsewhere) {
		t.Errorf("every host: %+v, want %d sent", r, len(elsewhere))
	}
	eventually(t, "the other host's deliveries to arrive", func() bool { return len(other.succeeded()) >= len(elsewhere) })
	wantOnce(t, other.succeeded(), elsewhere)
	list, err := b.hooks.FlowURLRecoveries(ctx, b.org)
	if err != nil || len(list) != 2 || list[0].ID != r.ID || list[1].Host != host {
		t.Errorf("FlowURLRecoveries = %+v, %v", list, err)
	}
	if _, err := b.hooks.FlowURLRecovery(ctx, "org-2", r.ID); !errors.Is(err, webhooks.ErrRecoveryNotFound) {
		t.Errorf("another organization's recovery: %v", err)
	}
	if _, err := b.hooks.Recovery(ctx, b.org, endpoint.ID, r.ID); !errors.Is(err, webhooks.ErrRecoveryNotFound) {
		t.Errorf("a recovery of the flows' URLs as an endpoint's: %v", err)
	}
}

// TestMissedSince: a recovery offered for a disabled endpoint starts when
// it was disabled, or the retry schedule before it began failing, never
// before what flowd keeps.
func TestMissedSince(t *testing.T) {
	t.Parallel()
	b := newBundle(t, dbtest.New(t), func(o *webhooks.Options) {
		o.Schedule = []time.Duration{time.Hour, 2 * time.Hour}
		o.EventRetention = 24 * time.Hour
	})
	now := time.Now()
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	for _, c := range []struct {
		name    string
		e       webhooks.Endpoint
		want    time.Time
		clamped bool
	}{
		{"disabled by a person", webhooks.Endpoint{DisabledAt: at(-time.Hour)}, now.Add(-time.Hour), false},
		{"failing", webhooks.Endpoint{DisabledAt: at(-time.Hour), FailingSince: at(-5 * time.Hour)}, now.Add(-8 * time.Hour), false},
		{"failing for long", webhooks.Endpoint{DisabledAt: at(-time.Hour), FailingSince: at(-23 * time.Hour)}, now.Add(-24 * time.Hour), true},
	} {
		if got, clamped := b.hooks.MissedSince(c.e, now); !got.Equal(c.want) || clamped != c.clamped {
			t.Errorf("%s: %s (clamped %v), want %s (%v)", c.name, got, clamped, c.want, c.clamped)
		}
	}
}
