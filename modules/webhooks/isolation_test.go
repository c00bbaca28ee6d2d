package webhooks_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/modules/webhooks"
)

// hangingReceiver holds every request until it is released, and counts how
// many it holds at once; once released it answers 204 at once.
type hangingReceiver struct {
	srv     *httptest.Server
	release chan struct{}
	once    sync.Once

	mu                   sync.Mutex
	holding, most, calls int
}

func newHangingReceiver(t *testing.T) *hangingReceiver {
	h := &hangingReceiver{release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.mu.Lock()
		h.calls++
		h.holding++
		h.most = max(h.most, h.holding)
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			h.holding--
			h.mu.Unlock()
		}()
		select {
		case <-h.release:
			w.WriteHeader(http.StatusNoContent)
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(func() {
		h.Release()
		h.srv.Close()
	})
	return h
}

func (h *hangingReceiver) URL() string { return h.srv.URL + "/hooks" }

// Release lets every held request and every later one through.
func (h *hangingReceiver) Release() { h.once.Do(func() { close(h.release) }) }

// Counts returns how many requests arrived and the most it held at once.
func (h *hangingReceiver) Counts() (calls, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls, h.most
}

// deliveryJob is a delivery with its River job, as the tests look at them.
type deliveryJob struct {
	ID, State               string
	Attempts                int // recorded in webhook_attempts
	JobAttempt, JobPriority int
	Snoozes                 int
}

// deliveryJobs returns the deliveries to url with their jobs.
func deliveryJobs(t *testing.T, pool *pgxpool.Pool, url string) []deliveryJob {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		select e.id::text, e.state, (select count(*) from webhook_attempts a where a.organization_id = e.organization_id and a.event_id = e.id),
			j.attempt, j.priority, coalesce((j.metadata->>'snoozes')::int, 0)
		from webhook_events e join river_job j on j.id = e.job_id
		where e.url = $1 order by e.created_at, e.id`, url)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []deliveryJob
	for rows.Next() {
		var d deliveryJob
		if err := rows.Scan(&d.ID, &d.State, &d.Attempts, &d.JobAttempt, &d.JobPriority, &d.Snoozes); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// events makes n events of distinct flows named prefix-1… to url.
func (b *bundle) events(n int, prefix, url string) []webhooks.Event {
	evs := make([]webhooks.Event, n)
	for i := range evs {
		evs[i] = b.event(webhooks.FlowCreated, fmt.Sprintf("%s-%d", prefix, i+1), url)
	}
	return evs
}

// TestAHangingHostHoldsOnlyItsLimitOfWorkers: with six workers and a limit
// of two per host, twenty deliveries to a receiver that hangs take two
// workers, and twenty to a healthy receiver, published after them, all
// arrive meanwhile. The held deliveries are snoozed, which River does not
// count as an attempt, and once the host's deliveries are slow they move
// behind fresh ones. When the receiver answers, every one of them is
// delivered at its first attempt, with one attempt recorded.
func TestAHangingHostHoldsOnlyItsLimitOfWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) {
		o.Workers, o.HostConcurrency, o.HoldBackoff = 6, 2, 20*time.Millisecond
		// No attempt may time out or be retried while the test looks.
		o.Timeout, o.Schedule = time.Minute, []time.Duration{time.Hour}
	})
	hanging, healthy := newHangingReceiver(t), newReceiver(t, b.secret)
	publish(t, b.pool, b.hooks, b.events(20, "slow", hanging.URL())...)
	publish(t, b.pool, b.hooks, b.events(20, "fast", healthy.URL())...)

	eventually(t, "the healthy receiver's twenty deliveries", func() bool { return len(healthy.Deliveries()) == 20 })
	if calls, most := hanging.Counts(); calls != 2 || most != 2 {
		t.Errorf("the hanging receiver got %d requests, %d at once; want 2 and 2", calls, most)
	}
	// Held while the host's deliveries are slow, they move behind fresh ones.
	eventually(t, "a held delivery behind fresh ones", func() bool {
		for _, d := range deliveryJobs(t, b.pool, hanging.URL()) {
			if d.JobPriority == 2 {
				return true
			}
		}
		return false
	})
	hanging.Release()
	eventually(t, "the hanging receiver's deliveries", func() bool {
		for _, d := range deliveryJobs(t, b.pool, hanging.URL()) {
			if d.State != "delivered" {
				return false
			}
		}
		return true
	})
	held := 0
	for _, d := range deliveryJobs(t, b.pool, hanging.URL()) {
		if d.Attempts != 1 || d.JobAttempt != 1 {
			t.Errorf("delivery %s: %d attempts recorded, River's attempt %d; want 1 and 1", d.ID, d.Attempts, d.JobAttempt)
		}
		if d.JobPriority != 1 && d.Snoozes == 0 {
			t.Errorf("delivery %s, never held back, has priority %d, want 1", d.ID, d.JobPriority)
		}
		if d.Snoozes > 0 {
			held++
		}
	}
	// The 18 beyond the limit were held, but for those (at most the four
	// other workers) waiting for a slot as the receiver answered.
	if held < 14 {
		t.Errorf("%d deliveries were held back, want at least 14 of the 18 beyond the limit", held)
	}
}

// TestRetriesComeAfterFreshEvents: five deliveries fail once during an
// outage and their retries come due; five fresh events are published after
// that. A single worker sends the five fresh ones first, although the
// retries have been due for longer.
func TestRetriesComeAfterFreshEvents(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	opts := func(o *webhooks.Options) { o.Workers, o.Schedule = 1, []time.Duration{time.Hour} }
	outage := newBundle(t, pool, opts)
	rcv := newReceiver(t, outage.secret)
	var over atomic.Bool
	rcv.respond = func(delivery, int) int { return map[bool]int{false: 503, true: 200}[over.Load()] }
	publish(t, pool, outage.hooks, outage.events(5, "old", rcv.URL())...)
	cancel, done := runUntilCancelled(outage)
	eventually(t, "five failed first attempts, moved behind fresh ones", func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `select count(*) from river_job where state = 'retryable' and priority = 2`).Scan(&n)
		return err == nil && n == 5
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The outage ends: the retries come due, as River's scheduler makes them.
	over.Store(true)
	if _, err := pool.Exec(context.Background(),
		`update river_job set state = 'available', scheduled_at = now() - interval '1 minute' where state = 'retryable'`); err != nil {
		t.Fatal(err)
	}
	publish(t, pool, outage.hooks, outage.events(5, "new", rcv.URL())...)

	newBundle(t, pool, opts).start(t)
	var sent []string
	eventually(t, "ten deliveries", func() bool {
		sent = sent[:0]
		for _, d := range rcv.Deliveries() {
			if d.Status == 200 {
				sent = append(sent, d.Payload.Data["flowId"].(string))
			}
		}
		return len(sent) == 10
	})
	for i, flow := range sent {
		if fresh := strings.HasPrefix(flow, "new-"); fresh != (i < 5) {
			t.Fatalf("deliveries in the order %v: the fresh ones should come first", sent)
		}
	}
}

// TestADeliveryHeldLongerThanItsRetriesFails: a delivery that its host
// cannot take for as long as its retries would have lasted fails for good,
// with an attempt that says it was not sent, and its task fails.
func TestADeliveryHeldLongerThanItsRetriesFails(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) {
		o.HostConcurrency, o.HoldBackoff, o.Timeout = 1, 20*time.Millisecond, time.Minute
	})
	hanging := newHangingReceiver(t)
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, "flow-a", hanging.URL()))
	eventually(t, "the first delivery to hang", func() bool { calls, _ := hanging.Counts(); return calls == 1 })
	publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, "flow-b", hanging.URL()))
	id := eventID(t, b.pool, "flow-b", webhooks.FlowCreated)
	eventually(t, "the held delivery to fail", func() bool { return eventState(t, b.pool, id) == "failed" })

	attempts, err := b.hooks.Attempts(context.Background(), b.org, "flow-b")
	if err != nil || len(attempts) != 1 || attempts[0].StatusCode != 0 || !strings.HasPrefix(attempts[0].Error, "not sent") {
		t.Fatalf("attempts of the held delivery: %+v, %v", attempts, err)
	}
	eventually(t, "its task to fail", func() bool { return b.reporter.has("failed org-1/task-flow-b: Webhook delivery to 127.0.0.1") })
	if calls, _ := hanging.Counts(); calls != 1 {
		t.Errorf("the receiver got %d requests, want only the first delivery's", calls)
	}
	hanging.Release()
	first := eventID(t, b.pool, "flow-a", webhooks.FlowCreated)
	eventually(t, "the first delivery", func() bool { return eventState(t, b.pool, first) == "delivered" })
}

// TestNoIndexStopsHOTUpdatesOfDeliveries: an attempt updates its delivery's
// state, last error and finish time (a redelivery its job too); an index on
// any of them would make each such update write every index of the table
// rather than update the row in place.
func TestNoIndexStopsHOTUpdatesOfDeliveries(t *testing.T) {
	t.Parallel()
	rows, err := newPool(t).Query(context.Background(),
		`select pg_get_indexdef(indexrelid) from pg_index where indrelid = 'webhook_events'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	updated := regexp.MustCompile(`\b(state|last_error|finished_at|job_id)\b`)
	for _, d := range defs {
		if updated.MatchString(d) {
			t.Errorf("an index on a column a delivery's attempt updates: %s", d)
		}
	}
	if len(defs) == 0 {
		t.Fatal("webhook_events has no indexes")
	}
}
