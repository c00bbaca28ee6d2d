package webhooks_test

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/webhooks"
)

// deliveryRow is a delivery as webhook_events holds it.
type deliveryRow struct {
	ID, FlowID, State, LastError string
}

// deliveriesTo returns the deliveries to an endpoint, oldest first.
func deliveriesTo(t *testing.T, pool *pgxpool.Pool, endpointID string) []deliveryRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `select id::text, flow_id, state, last_error from webhook_events
		where endpoint_id = $1 order by created_at, id`, endpointID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[deliveryRow])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// finished reports whether there are deliveries and none is pending.
func finished(ds []deliveryRow) bool {
	return len(ds) > 0 && !slices.ContainsFunc(ds, func(d deliveryRow) bool { return d.State == "pending" })
}

// countEvents counts the stored events of a type.
func countEvents(t *testing.T, pool *pgxpool.Pool, typ webhooks.EventType) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `select count(*) from events where type = $1`, string(typ)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// failingReceiver is a receiver that answers what status holds, 500 at first.
func failingReceiver(t *testing.T, secret string) (*receiver, *atomic.Int32) {
	var status atomic.Int32
	status.Store(http.StatusInternalServerError)
	r := newReceiver(t, secret)
	r.respond = func(delivery, int) int { return int(status.Load()) }
	return r, &status
}

// createEndpoint registers an endpoint of the bundle's organization for r.
func (b *bundle) createEndpoint(t *testing.T, r *receiver, enabled bool, types ...webhooks.EventType) webhooks.Endpoint {
	t.Helper()
	e, err := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true}).
		Create(context.Background(), b.org, webhooks.NewEndpoint{URL: r.URL(), Enabled: enabled, EventTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (b *bundle) endpoints() *webhooks.EndpointStore {
	return webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
}

// flowEvent is the first event of a flow without a webhookUrl: it goes to
// the organization's endpoints only.
func (b *bundle) flowEvent(flow string) webhooks.Event {
	ev := b.event(webhooks.FlowCreated, flow, "")
	ev.Sequence = 1
	return ev
}

// TestAFailingEndpointIsDisabledOnce: an endpoint whose deliveries fail for
// DisableAfter is disabled once, with a reason that names neither its path
// nor its query; its pending deliveries fail and their jobs end; the one
// other endpoint that takes endpoint.disabled receives it once, signed, and
// the events API lists it without a flow. Enabling the endpoint clears the
// reason, and redelivery then sends what failed.
func TestAFailingEndpointIsDisabledOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) {
		o.DisableAfter = 2 * time.Second
		o.Schedule = slices.Repeat([]time.Duration{200 * time.Millisecond}, 40) // retrying for 8 s and more
	})
	ctx := context.Background()
	dead, status := failingReceiver(t, b.secret)
	watcher, flowsOnly, off := newReceiver(t, b.secret), newReceiver(t, b.secret), newReceiver(t)
	ep := b.createEndpoint(t, dead, true)
	b.createEndpoint(t, watcher, true, webhooks.EndpointDisabled)
	b.createEndpoint(t, flowsOnly, true, webhooks.FlowCreated)
	b.createEndpoint(t, off, false)
	publish(t, b.pool, b.hooks, b.flowEvent("flow-1"), b.flowEvent("flow-2"))

	eventually(t, "the endpoint disabled and its deliveries failed", func() bool {
		return finished(deliveriesTo(t, b.pool, ep.ID))
	})
	got, err := b.endpoints().Get(ctx, b.org, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	reason := regexp.MustCompile(`^Deliveries failed for \d+ seconds? without a success; the last failure: HTTP 500 Internal Server Error\.$`)
	if got.Enabled || !reason.MatchString(got.DisabledReason) || got.FailingSince == nil {
		t.Fatalf("after failing past the window: %+v", got)
	}
	for _, d := range deliveriesTo(t, b.pool, ep.ID) {
		if d.State != "failed" || d.LastError != "Not sent: flowd disabled the endpoint. "+got.DisabledReason {
			t.Errorf("pending delivery of %s: %s %q", d.FlowID, d.State, d.LastError)
		}
		eventually(t, "the failed delivery's job to end", func() bool { return jobState(t, b.pool, d.ID) == "cancelled" })
	}

	// One endpoint.disabled, to the one endpoint that takes it, once.
	var ds []delivery
	eventually(t, "endpoint.disabled delivered", func() bool {
		ds = watcher.Deliveries()
		return len(ds) > 0
	})
	page, err := b.hooks.Events(ctx, b.org, webhooks.EventQuery{Type: webhooks.EndpointDisabled})
	if err != nil {
		t.Fatal(err)
	}
	if n := countEvents(t, b.pool, webhooks.EndpointDisabled); n != 1 || len(page.Events) != 1 {
		t.Fatalf("%d endpoint.disabled events, %d listed; want 1", n, len(page.Events))
	}
	rec := page.Events[0]
	if rec.FlowID != "" || rec.Sequence != 0 || rec.ID != ds[0].ID {
		t.Errorf("listed as %+v, delivered as %s", rec, ds[0].ID)
	}
	eventually(t, "the delivery recorded", func() bool {
		_, deliveries, err := b.hooks.Event(ctx, b.org, rec.ID)
		return err == nil && len(deliveries) == 1 && deliveries[0].State == "delivered"
	})
	if len(watcher.Deliveries()) != 1 {
		t.Fatalf("the watcher received %d deliveries, want 1", len(watcher.Deliveries()))
	}
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
	p := ds[0].Payload
	want := map[string]any{"endpointId": ep.ID, "organizationId": b.org, "url": dead.srv.URL, "reason": got.DisabledReason,
		"failingSince": stamp(*got.FailingSince), "disabledAt": p.Timestamp}
	if p.Type != "endpoint.disabled" || len(p.Data) != len(want) {
		t.Fatalf("payload %+v", p)
	}
	for k, v := range want {
		if p.Data[k] != v {
			t.Errorf("data.%s = %v, want %v", k, p.Data[k], v)
		}
	}
	if at, err := time.Parse(time.RFC3339, p.Timestamp); err != nil || at.Before(got.FailingSince.Add(2*time.Second).Truncate(time.Millisecond)) {
		t.Errorf("disabled at %s, failing since %s: %v", p.Timestamp, got.FailingSince, err)
	}
	for name, r := range map[string]*receiver{"flow.created only": flowsOnly, "disabled by a person": off} {
		for _, d := range r.Deliveries() {
			if d.Payload.Type == "endpoint.disabled" {
				t.Errorf("%s received endpoint.disabled", name)
			}
		}
	}
	if off.Arrived() != 0 || len(flowsOnly.Deliveries()) != 2 {
		t.Errorf("the disabled endpoint got %d, the flow.created one %d deliveries", off.Arrived(), len(flowsOnly.Deliveries()))
	}

	// The banner's list names it until it is enabled, which clears the
	// reason; redelivery then sends what failed.
	if list, err := b.endpoints().Disabled(ctx, b.org); err != nil || len(list) != 1 || list[0].ID != ep.ID {
		t.Fatalf("Disabled = %v, %v", list, err)
	}
	status.Store(http.StatusOK)
	got, err = b.endpoints().Update(ctx, b.org, ep.ID, webhooks.EndpointUpdate{Enabled: ptr(true)}, etag.Any)
	if err != nil || !got.Enabled || got.DisabledReason != "" || got.FailingSince != nil {
		t.Fatalf("enabled: %+v, %v", got, err)
	}
	if list, err := b.endpoints().Disabled(ctx, b.org); err != nil || len(list) != 0 {
		t.Fatalf("Disabled after enabling = %v, %v", list, err)
	}
	first := eventID(t, b.pool, "flow-1", webhooks.FlowCreated)
	if n, err := b.hooks.Redeliver(ctx, b.org, first, ep.ID); err != nil || n != 1 {
		t.Fatalf("Redeliver = %d, %v", n, err)
	}
	eventually(t, "the redelivery", func() bool { return dead.count(first, 200, 300) == 1 })
}

// TestASuccessStartsTheWindowAgain: an endpoint that failed, then waited
// past DisableAfter, is disabled by its next failure, unless a delivery
// succeeded in between.
func TestASuccessStartsTheWindowAgain(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		succeed bool
	}{
		{"failing past the window disables", false},
		{"a success in between starts the window again", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(o *webhooks.Options) {
				o.DisableAfter = time.Hour
				o.Schedule = []time.Duration{10 * time.Millisecond} // two attempts, well within the window
			})
			ctx := context.Background()
			rcv, status := failingReceiver(t, b.secret)
			ep := b.createEndpoint(t, rcv, true)
			// send publishes a flow's event and returns its delivery, finished.
			send := func(flow string) deliveryRow {
				t.Helper()
				publish(t, b.pool, b.hooks, b.flowEvent(flow))
				var d deliveryRow
				eventually(t, "the delivery of "+flow, func() bool {
					ds := deliveriesTo(t, b.pool, ep.ID)
					d = ds[len(ds)-1]
					return d.FlowID == flow && d.State != "pending"
				})
				return d
			}
			failingSince := func() *time.Time {
				t.Helper()
				e, err := b.endpoints().Get(ctx, b.org, ep.ID)
				if err != nil {
					t.Fatal(err)
				}
				return e.FailingSince
			}

			if d := send("flow-1"); d.State != "failed" || !strings.HasSuffix(d.LastError, "failed: HTTP 500 Internal Server Error") || failingSince() == nil {
				t.Fatalf("the first failure: %+v, failing since %v", d, failingSince())
			}
			// Past the window, with no attempt: the failure is two hours old.
			if _, err := b.pool.Exec(ctx, `update webhook_endpoints set failing_since = now() - interval '2 hours' where id = $1`, ep.ID); err != nil {
				t.Fatal(err)
			}
			if tt.succeed {
				status.Store(http.StatusOK)
				if d := send("flow-2"); d.State != "delivered" || failingSince() != nil {
					t.Fatalf("the success: %+v, failing since %v", d, failingSince())
				}
				status.Store(http.StatusInternalServerError)
			}
			last := send("flow-3")
			got, err := b.endpoints().Get(ctx, b.org, ep.ID)
			if err != nil {
				t.Fatal(err)
			}
			if tt.succeed {
				if !got.Enabled || got.DisabledReason != "" || got.FailingSince == nil ||
					!strings.HasSuffix(last.LastError, "failed: HTTP 500 Internal Server Error") {
					t.Fatalf("disabled though a success came in between: %+v, last delivery %+v", got, last)
				}
				return
			}
			if got.Enabled || got.DisabledReason == "" || !strings.HasPrefix(last.LastError, "Not sent: flowd disabled the endpoint.") {
				t.Fatalf("not disabled after failing past the window: %+v, last delivery %+v", got, last)
			}
		})
	}
}

// countingHandler counts the log records by message.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r.Message]++
	return nil
}

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[msg]
}

// TestTwoInstancesDisableOnce: two instances delivering an endpoint's
// failing deliveries both find it due; it is disabled, and announced, once.
func TestTwoInstancesDisableOnce(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	logs := []*countingHandler{{counts: map[string]int{}}, {counts: map[string]int{}}}
	var instances []*bundle
	for _, h := range logs {
		// Few workers each, and a receiver that holds the first attempts
		// until more are in flight than one instance's workers can send: both
		// instances make failed attempts however slowly the second starts.
		b := newBundle(t, pool, func(o *webhooks.Options) {
			o.DisableAfter = time.Second
			o.Schedule = slices.Repeat([]time.Duration{100 * time.Millisecond}, 40)
			o.Workers = 4
			o.Timeout = time.Until(testwait.Deadline(t))
			o.Log = slog.New(h)
		})
		instances = append(instances, b)
	}
	b := instances[0]
	dead := newReceiver(t, b.secret)
	var inFlight atomic.Int32
	shared := make(chan struct{})
	var share sync.Once
	dead.respond = func(delivery, int) int {
		if inFlight.Add(1) > 4 {
			share.Do(func() { close(shared) })
		}
		select {
		case <-shared:
		case <-time.After(time.Until(testwait.Deadline(t))):
		}
		time.Sleep(50 * time.Millisecond)
		return http.StatusInternalServerError
	}
	watcher := newReceiver(t, b.secret)
	ep := b.createEndpoint(t, dead, true)
	b.createEndpoint(t, watcher, true, webhooks.EndpointDisabled)
	var evs []webhooks.Event
	for i := range 20 {
		evs = append(evs, b.flowEvent("flow-"+string(rune('a'+i))))
	}
	publish(t, pool, b.hooks, evs...)
	for _, in := range instances {
		in.start(t)
	}

	eventually(t, "every delivery to the endpoint failed", func() bool { return finished(deliveriesTo(t, pool, ep.ID)) })
	eventually(t, "endpoint.disabled delivered", func() bool { return len(watcher.Deliveries()) > 0 })
	for i, h := range logs {
		if h.count("webhook delivery failed") == 0 {
			t.Errorf("instance %d made no failed attempt: the instances did not share the work", i)
		}
	}
	if n := logs[0].count("webhook endpoint disabled: its deliveries kept failing") + logs[1].count("webhook endpoint disabled: its deliveries kept failing"); n != 1 {
		t.Errorf("disabled %d times, want once", n)
	}
	if n := countEvents(t, pool, webhooks.EndpointDisabled); n != 1 || len(watcher.Deliveries()) != 1 {
		t.Errorf("%d endpoint.disabled events, %d deliveries; want 1", n, len(watcher.Deliveries()))
	}
}
