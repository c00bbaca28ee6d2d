package webhooks_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/webhooks"
)

// failedBody is the body of the seeded deliveries: what PublishTx would
// have stored, so that the receiver reads it as a delivery.
const failedBody = `{"type":"flow.accepted","timestamp":"2026-01-02T03:04:05.000Z","data":{"flowId":"f","sequence":1}}`

// seedDeliveries stores n events of the bundle's organization, each with a
// delivery to endpoint in state, created at seven instants from at on
// (ties, so that a recovery's order needs the delivery's id), to url. It
// returns the events' ids.
func (b *bundle) seedDeliveries(t *testing.T, endpoint, url, state string, n int, at time.Time) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		with ev as (
			insert into events (organization_id, id, flow_id, sequence, type, body, created_at)
			select $1, gen_random_uuid(), 'flow-' || g, 1, 'flow.accepted', $4, $5::timestamptz + (g % 7) * interval '1 millisecond'
			from generate_series(1, $3) g
			returning id, flow_id, body, created_at)
		insert into webhook_events (id, organization_id, flow_id, type, url, body, state, last_error, job_id,
			created_at, finished_at, event_id, endpoint_id)
		select gen_random_uuid(), $1, flow_id, 'flow.accepted', $6, body, $7,
			case when $7 = 'failed' then 'Webhook delivery failed: HTTP 500' else '' end, 0,
			created_at, case when $7 = 'pending' then null else created_at end, id, $2
		from ev
		returning event_id::text`, b.org, endpoint, n, failedBody, at, url, state)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// recoveryJobs counts the delivery jobs at the backlog priority, and the
// deliveries they are for: equal when no delivery was scheduled twice.
func recoveryJobs(t *testing.T, pool *pgxpool.Pool) (jobs, deliveries int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `select count(*), count(distinct args->>'event_id') from river_job
		where kind = 'flowd.webhook_delivery' and priority = 3`).Scan(&jobs, &deliveries); err != nil {
		t.Fatal(err)
	}
	return jobs, deliveries
}

// states counts the deliveries of events by state.
func states(t *testing.T, pool *pgxpool.Pool, eventIDs []string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `select state, count(*)::int from webhook_events
		where event_id = any($1::uuid[]) group by state`, eventIDs)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// newEndpoint registers an enabled endpoint of the bundle's organization to url.
func (b *bundle) newEndpoint(t *testing.T, url string) webhooks.Endpoint {
	t.Helper()
	e, err := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true}).
		Create(context.Background(), b.org, webhooks.NewEndpoint{URL: url, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRecoveryResendsEachFailedDeliveryOnce: a recovery over several
// batches sends every failed delivery of its window to the endpoint's URL
// of now, each once and at the backlog priority, and leaves alone what is
// outside it: pending and delivered deliveries, those before since, and
// another endpoint's. Its progress reaches its total.
func TestRecoveryResendsEachFailedDeliveryOnce(t *testing.T) {
	t.Parallel()
	// Small batches, so that several run with few deliveries to send.
	const batch = 100
	// The gate would hold most of them back, one receiver being one host:
	// the isolation tests cover that.
	b := setup(t, func(o *webhooks.Options) { o.RecoveryBatch, o.HostConcurrency = batch, 100 })
	ctx := context.Background()
	rcv, other := newReceiver(t, b.secret), newReceiver(t)
	ep, otherEp := b.newEndpoint(t, rcv.URL()), b.newEndpoint(t, other.URL())
	// The deliveries went to the endpoint's earlier URL, which is gone.
	const oldURL = "http://127.0.0.1:9/moved"
	hour := time.Now().Add(-time.Hour)
	n := 2*batch + 50
	failed := b.seedDeliveries(t, ep.ID, oldURL, "failed", n, hour.Add(time.Minute))
	pending := b.seedDeliveries(t, ep.ID, oldURL, "pending", 3, hour.Add(time.Minute))
	delivered := b.seedDeliveries(t, ep.ID, oldURL, "delivered", 3, hour.Add(time.Minute))
	before := b.seedDeliveries(t, ep.ID, oldURL, "failed", 3, hour.Add(-time.Minute))
	elsewhere := b.seedDeliveries(t, otherEp.ID, other.URL(), "failed", 3, hour.Add(time.Minute))

	r, err := b.hooks.Recover(ctx, b.org, ep.ID, hour, "client:test")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != webhooks.RecoveryQueued || r.Total != n || r.Scheduled != 0 || r.RequestedBy != "client:test" || !r.Since.Equal(hour.Truncate(time.Microsecond)) {
		t.Fatalf("requested %+v", r)
	}
	eventually(t, "the recovery to finish", func() bool {
		got, err := b.hooks.Recovery(ctx, b.org, ep.ID, r.ID)
		r = got
		return err == nil && !r.State.Active()
	})
	if r.State != webhooks.RecoveryDone || r.Scheduled != n || r.Total != n || r.StartedAt == nil || r.FinishedAt == nil || r.Error != "" {
		t.Fatalf("finished %+v", r)
	}
	eventually(t, "every failed delivery to arrive", func() bool { return len(rcv.Deliveries()) >= n })
	eventually(t, "every delivery recorded", func() bool { return states(t, b.pool, failed)["delivered"] == n })
	arrived := map[string]int{}
	for _, d := range rcv.Deliveries() {
		arrived[d.ID]++
	}
	for _, id := range failed {
		if arrived[id] != 1 {
			t.Fatalf("delivery of event %s arrived %d times, want once", id, arrived[id])
		}
	}
	if len(arrived) != n {
		t.Errorf("%d events arrived, want the %d failed ones", len(arrived), n)
	}
	if jobs, deliveries := recoveryJobs(t, b.pool); jobs != n || deliveries != n {
		t.Errorf("%d jobs at the backlog priority for %d deliveries, want %d of each", jobs, deliveries, n)
	}
	for name, c := range map[string]struct {
		ids  []string
		want string
	}{
		"pending": {pending, "pending"}, "delivered": {delivered, "delivered"},
		"before since": {before, "failed"}, "another endpoint's": {elsewhere, "failed"},
	} {
		if got := states(t, b.pool, c.ids); got[c.want] != len(c.ids) {
			t.Errorf("%s deliveries: %v, want all %s", name, got, c.want)
		}
	}
	if other.Arrived() != 0 {
		t.Errorf("another endpoint got %d deliveries", other.Arrived())
	}
	list, err := b.hooks.Recoveries(ctx, b.org, ep.ID)
	if err != nil || len(list) != 1 || list[0].ID != r.ID {
		t.Fatalf("Recoveries = %+v, %v", list, err)
	}
}

// TestRecoveryResumesAfterACrash: a recovery stopped between batches (its
// instance died) is taken up by another instance from its cursor; batches
// run at once take turns; deliveries that fail after the recovery was
// requested are not part of it. No delivery is scheduled twice. The
// instances run no workers: the test runs the batches, of the real size.
func TestRecoveryResumesAfterACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	const batch = webhooks.DefaultRecoveryBatch
	first := newBundle(t, pool)
	rcv := newReceiver(t, first.secret)
	ep := first.newEndpoint(t, rcv.URL())
	since := time.Now().Add(-time.Hour)
	n := 2*batch + 500
	failed := first.seedDeliveries(t, ep.ID, rcv.URL(), "failed", n, since)
	r, err := first.hooks.Recover(ctx, first.org, ep.ID, since, "staff:ada")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.hooks.Recover(ctx, first.org, ep.ID, since, "staff:ada"); !errors.Is(err, webhooks.ErrRecoveryRunning) {
		t.Fatalf("a second recovery while one is queued: %v, want ErrRecoveryRunning", err)
	}
	late := first.seedDeliveries(t, ep.ID, rcv.URL(), "failed", 3, time.Now().Add(time.Second))

	// Two runs at once: they take one batch each, one after the other.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if more, err := first.hooks.RecoverBatch(ctx, first.org, r.ID); err != nil || !more {
				t.Errorf("a batch: more %v, %v", more, err)
			}
		}()
	}
	wg.Wait()
	r, err = first.hooks.Recovery(ctx, first.org, ep.ID, r.ID)
	if err != nil || r.State != webhooks.RecoveryRunning || r.Scheduled != 2*batch || r.Total != n {
		t.Fatalf("after two batches: %+v %v", r, err)
	}
	if got := states(t, pool, failed); got["pending"] != 2*batch {
		t.Fatalf("after two batches the deliveries are %v", got)
	}
	if _, err := first.hooks.Recover(ctx, first.org, ep.ID, since, "staff:ada"); !errors.Is(err, webhooks.ErrRecoveryRunning) {
		t.Fatalf("a second recovery while one runs: %v, want ErrRecoveryRunning", err)
	}
	// A few of those sent again failed again at once (410 Gone): the
	// recovery, past them, does not send them a second time.
	const again = 10
	if _, err := pool.Exec(ctx, `update webhook_events set state = 'failed', finished_at = now()
		where id in (select id from webhook_events where event_id = any($1::uuid[]) and state = 'pending' limit $2)`, failed, again); err != nil {
		t.Fatal(err)
	}

	// The first instance is gone; a second one finishes from the cursor.
	second := newBundle(t, pool)
	for more := true; more; {
		if more, err = second.hooks.RecoverBatch(ctx, second.org, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	r, err = second.hooks.Recovery(ctx, second.org, ep.ID, r.ID)
	if err != nil || r.State != webhooks.RecoveryDone || r.Scheduled != n || r.Total != n {
		t.Fatalf("finished %+v %v, want done with %d sent again", r, err, n)
	}
	if jobs, deliveries := recoveryJobs(t, pool); jobs != n || deliveries != n {
		t.Fatalf("%d jobs at the backlog priority for %d deliveries, want %d of each", jobs, deliveries, n)
	}
	if got := states(t, pool, failed); got["pending"] != n-again || got["failed"] != again {
		t.Errorf("the deliveries: %v, want %d pending and %d failed again", got, n-again, again)
	}
	if got := states(t, pool, late); got["failed"] != len(late) {
		t.Errorf("deliveries that failed after the request: %v, want still failed", got)
	}
	// Once it has finished, the endpoint may be recovered again.
	if _, err := second.hooks.Recover(ctx, second.org, ep.ID, since, "staff:ada"); err != nil {
		t.Fatalf("a recovery after the last finished: %v", err)
	}
}

// TestRecoveryRefusals: what Recover refuses, and a recovery of an
// endpoint deleted or disabled while it waits, which fails.
func TestRecoveryRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBundle(t, dbtest.New(t))
	ep := b.newEndpoint(t, "http://127.0.0.1:9/hooks")
	endpoints := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	disabled := b.newEndpoint(t, "http://127.0.0.1:9/off")
	if _, err := endpoints.Update(ctx, b.org, disabled.ID, webhooks.EndpointUpdate{Enabled: ptr(false)}, etag.Any); err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		name    string
		org, id string
		since   time.Time
		want    error
		invalid bool
	}{
		{"unknown endpoint", b.org, "019ab3c6-1111-7f80-9a1b-2c3d4e5f6a7d", hour, webhooks.ErrEndpointNotFound, false},
		{"malformed id", b.org, "nope", hour, webhooks.ErrEndpointNotFound, false},
		{"another organization's", "org-2", ep.ID, hour, webhooks.ErrEndpointNotFound, false},
		{"disabled", b.org, disabled.ID, hour, webhooks.ErrEndpointDisabled, false},
		{"no since", b.org, ep.ID, time.Time{}, nil, true},
		{"since in the future", b.org, ep.ID, time.Now().Add(time.Minute), nil, true},
		{"since past what is kept", b.org, ep.ID, time.Now().Add(-webhooks.DefaultEventRetention - time.Minute), nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := b.hooks.Recover(ctx, c.org, c.id, c.since, "client:test")
			switch {
			case c.invalid && !slices.Equal(fieldsOf(err), []string{"since"}):
				t.Errorf("Recover = %v, want an Invalid error naming since", err)
			case !c.invalid && !errors.Is(err, c.want):
				t.Errorf("Recover = %v, want %v", err, c.want)
			}
		})
	}
	if _, err := b.hooks.Recoveries(ctx, "org-2", ep.ID); !errors.Is(err, webhooks.ErrEndpointNotFound) {
		t.Errorf("another organization's recoveries: %v", err)
	}

	// The endpoint changes while its recovery waits: the recovery fails,
	// saying why, and the endpoint may be recovered again.
	for _, c := range []struct {
		name   string
		change func(id string) error
		want   string
	}{
		{"disabled", func(id string) error {
			_, err := endpoints.Update(ctx, b.org, id, webhooks.EndpointUpdate{Enabled: ptr(false)}, etag.Any)
			return err
		}, "The endpoint was disabled."},
		{"deleted", func(id string) error { _, err := endpoints.Delete(ctx, b.org, id, etag.Any); return err }, "The endpoint was deleted."},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := b.newEndpoint(t, "http://127.0.0.1:9/"+c.name)
			r, err := b.hooks.Recover(ctx, b.org, e.ID, hour, "client:test")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.change(e.ID); err != nil {
				t.Fatal(err)
			}
			if more, err := b.hooks.RecoverBatch(ctx, b.org, r.ID); more || err != nil {
				t.Fatalf("the batch: more %v, %v", more, err)
			}
			var state, message string
			if err := b.pool.QueryRow(ctx, `select state, error from webhook_recoveries where id = $1`, r.ID).Scan(&state, &message); err != nil {
				t.Fatal(err)
			}
			if state != "failed" || message != c.want {
				t.Errorf("the recovery is %s (%q), want failed (%q)", state, message, c.want)
			}
		})
	}
}

// TestARecoveredDeliveryIsSentByItsNewJob: a delivery failed when its
// endpoint was disabled keeps its job, with its last attempt left, and a
// recovery gives it a new one. The old job ends without sending, so that
// the receiver's first failures cost the new job retries, not the delivery.
func TestARecoveredDeliveryIsSentByItsNewJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBundle(t, dbtest.New(t))
	rcv := newReceiver(t, b.secret)
	rcv.respond = func(_ delivery, nth int) int {
		if nth <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	ep := b.createEndpoint(t, rcv, true)
	since := time.Now()
	publish(t, b.pool, b.hooks, b.flowEvent("flow-1"))
	id := deliveriesTo(t, b.pool, ep.ID)[0].ID
	var oldJob int64
	// As flowd disabling the endpoint leaves it: the delivery failed, its
	// job still to run, at its last attempt.
	if err := b.pool.QueryRow(ctx, `update webhook_events set state = 'failed', finished_at = now() where id = $1
		returning job_id`, id).Scan(&oldJob); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `update river_job set attempt = max_attempts - 1 where id = $1`, oldJob); err != nil {
		t.Fatal(err)
	}
	r, err := b.hooks.Recover(ctx, b.org, ep.ID, since, "staff:ada")
	if err != nil {
		t.Fatal(err)
	}
	if more, err := b.hooks.RecoverBatch(ctx, b.org, r.ID); more || err != nil {
		t.Fatalf("the batch: more %v, %v", more, err)
	}
	b.start(t)
	eventually(t, "the recovered delivery to be delivered or to fail", func() bool {
		return eventState(t, b.pool, id) != "pending"
	})
	if got := eventState(t, b.pool, id); got != "delivered" || rcv.count(eventID(t, b.pool, "flow-1", webhooks.FlowCreated), 200, 300) != 1 {
		t.Fatalf("the recovered delivery is %s after %d requests, want delivered once", got, rcv.Arrived())
	}
	var state string
	if err := b.pool.QueryRow(ctx, `select state::text from river_job where id = $1`, oldJob).Scan(&state); err != nil || state != "cancelled" {
		t.Errorf("the old job is %s (%v), want cancelled", state, err)
	}
}
