package webhooks_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/webhooks"
)

// orderChecker answers an ordered endpoint's deliveries and notes every one
// that arrives before an earlier event of its flow was answered for good
// (2xx, or the last failure before flowd gives up).
type orderChecker struct {
	mu         sync.Mutex
	finished   map[string]map[int]bool // flow → sequences answered for good
	violations []string
	// answer decides the status of a delivery and whether that answer ends
	// it (flowd delivers it or gives it up).
	answer func(flow string, seq, nth int) (status int, final bool)
}

func newOrderChecker(answer func(flow string, seq, nth int) (int, bool)) *orderChecker {
	return &orderChecker{finished: map[string]map[int]bool{}, answer: answer}
}

func (c *orderChecker) respond(d delivery, nth int) int {
	flow, _ := d.Payload.Data["flowId"].(string)
	seqf, _ := d.Payload.Data["sequence"].(float64)
	seq := int(seqf)
	c.mu.Lock()
	if c.finished[flow] == nil {
		c.finished[flow] = map[int]bool{}
	}
	for before := 1; before < seq; before++ {
		if !c.finished[flow][before] {
			c.violations = append(c.violations, fmt.Sprintf("%s #%d (attempt %d) arrived before #%d was delivered or given up", flow, seq, nth, before))
		}
	}
	c.mu.Unlock()
	// The answer may hang: the other deliveries must not wait for it here.
	status, final := c.answer(flow, seq, nth)
	if final {
		c.mu.Lock()
		c.finished[flow][seq] = true
		c.mu.Unlock()
	}
	return status
}

func (c *orderChecker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// orderedEndpoint registers an enabled endpoint on r's URL with per-flow
// ordering.
func orderedEndpoint(t *testing.T, b *bundle, r *receiver) webhooks.Endpoint {
	t.Helper()
	endpoints := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	e, err := endpoints.Create(context.Background(), b.org, webhooks.NewEndpoint{URL: r.URL(), Enabled: true, Ordering: webhooks.PerFlow})
	if err != nil {
		t.Fatal(err)
	}
	if e.Ordering != webhooks.PerFlow {
		t.Fatalf("the endpoint's ordering is %q", e.Ordering)
	}
	return e
}

// publishFlows publishes events 1…n of each flow, one transaction per
// event, the flows' events interleaved, to no URL of their own.
func publishFlows(t *testing.T, b *bundle, flows []string, n int) {
	t.Helper()
	types := []webhooks.EventType{webhooks.FlowCreated, webhooks.FlowOpened, webhooks.FlowAccepted, webhooks.FlowWithdrawn}
	for seq := 1; seq <= n; seq++ {
		for _, f := range flows {
			ev := b.event(types[(seq-1)%len(types)], f, "")
			ev.Sequence = seq
			publish(t, b.pool, b.hooks, ev)
		}
	}
}

// deliveriesOf describes every delivery of the bundle's organization: its
// flow and sequence, state, whether held, attempts and its job's state.
// River's jobs are read apart: on Citus they are a local table, which a
// statement cannot join to the distributed deliveries.
func deliveriesOf(t *testing.T, b *bundle) string {
	t.Helper()
	ctx := context.Background()
	rows, err := b.pool.Query(ctx, `select d.flow_id || '#' || e.sequence || ' ' || d.state
			|| case when d.held then ' held' else '' end
			|| ' attempts ' || (select count(*) from webhook_attempts a where a.organization_id = d.organization_id and a.event_id = d.id),
			d.job_id
		from webhook_events d join events e on e.organization_id = d.organization_id and e.id = d.event_id
		where d.organization_id = $1 order by d.flow_id, e.sequence`, b.org)
	if err != nil {
		t.Fatal(err)
	}
	type delivery struct {
		Described string
		JobID     int64
	}
	deliveries, err := pgx.CollectRows(rows, pgx.RowToStructByPos[delivery])
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, len(deliveries))
	for i, d := range deliveries {
		job := "none"
		_ = b.pool.QueryRow(ctx, `select state::text || ' at ' || to_char(scheduled_at - now(), 'MI:SS') from river_job where id = $1`, d.JobID).Scan(&job)
		lines[i] = d.Described + " job " + job
	}
	return strings.Join(lines, "; ")
}

// deliveryStates counts the organization's deliveries by state.
func deliveryStates(t *testing.T, b *bundle) map[string]int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `select state, count(*) from webhook_events where organization_id = $1 group by state`, b.org)
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

// TestPerFlowOrderingUnderRetries: an endpoint with per-flow ordering
// receives no event of a flow before the one before it was delivered or
// given up, while the receiver fails first attempts, answers 410 to one
// event and fails another until its retries run out; every other event is
// delivered, none is lost.
func TestPerFlowOrderingUnderRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	flows := []string{"flow-a", "flow-b", "flow-c", "flow-d"}
	const n = 6
	attempts := len(testSchedule) + 1
	check := newOrderChecker(func(flow string, seq, nth int) (int, bool) {
		switch {
		case flow == "flow-b" && seq == 2:
			return http.StatusGone, true
		case flow == "flow-c" && seq == 3:
			return http.StatusServiceUnavailable, nth >= attempts
		case seq%2 == 1 && nth == 1:
			return http.StatusInternalServerError, false
		}
		return http.StatusOK, true
	})
	r := newReceiver(t, b.secret)
	r.respond = check.respond
	orderedEndpoint(t, b, r)

	publishFlows(t, b, flows, n)

	eventually(t, "every delivery finished", func() bool {
		s := deliveryStates(t, b)
		return s["pending"] == 0 && s["delivered"]+s["failed"] == len(flows)*n
	})
	for _, v := range check.Violations() {
		t.Error(v)
	}
	if s := deliveryStates(t, b); s["failed"] != 2 || s["delivered"] != len(flows)*n-2 {
		t.Errorf("deliveries by state: %v; want 2 given up (the 410 and the exhausted one), the rest delivered", s)
	}
	delivered := map[string]bool{}
	for _, d := range r.Deliveries() {
		if d.Status == http.StatusOK {
			delivered[fmt.Sprintf("%v#%v", d.Payload.Data["flowId"], d.Payload.Data["sequence"])] = true
		}
	}
	if len(delivered) != len(flows)*n-2 {
		t.Errorf("the receiver accepted %d distinct events, want %d", len(delivered), len(flows)*n-2)
	}
	// Waiting for a predecessor is not an attempt: every delivered event
	// has at most the one failure the receiver gave it, plus its success.
	var most int
	if err := b.pool.QueryRow(context.Background(), `select coalesce(max(n), 0) from (
		select count(*) as n from webhook_attempts a join webhook_events e on e.organization_id = a.organization_id and e.id = a.event_id
		where e.organization_id = $1 and e.state = 'delivered' group by e.id) c`, b.org).Scan(&most); err != nil {
		t.Fatal(err)
	}
	if most > 2 {
		t.Errorf("a delivered event has %d attempts; holding it in order must not count as one", most)
	}
}

// TestPerFlowOrderingDoesNotHoldOtherFlows: while a flow's first event
// hangs at the receiver, its later events wait, held and not attempted,
// and every other flow's events are delivered; once the receiver answers,
// the held ones follow in order.
func TestPerFlowOrderingDoesNotHoldOtherFlows(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) { o.Timeout = time.Minute })
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	check := newOrderChecker(func(flow string, seq, nth int) (int, bool) {
		if flow == "stuck" && seq == 1 {
			<-release
		}
		return http.StatusOK, true
	})
	r := newReceiver(t, b.secret)
	r.respond = check.respond
	t.Cleanup(unblock) // before the receiver closes, which waits for the hung request
	orderedEndpoint(t, b, r)

	flows := []string{"stuck", "flow-1", "flow-2", "flow-3"}
	publishFlows(t, b, flows, 4)

	testwait.For(t, "the other flows delivered", func() (bool, string) {
		var n int
		if err := b.pool.QueryRow(context.Background(), `select count(*) from webhook_events
			where organization_id = $1 and flow_id <> 'stuck' and state = 'delivered'`, b.org).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 12, deliveriesOf(t, b)
	})
	eventually(t, "the stuck flow's later events held", func() bool {
		var n int
		if err := b.pool.QueryRow(context.Background(), `select count(*) from webhook_events
			where organization_id = $1 and flow_id = 'stuck' and held and state = 'pending'`, b.org).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 3
	})
	for _, d := range r.Deliveries() {
		if d.Payload.Data["flowId"] == "stuck" {
			t.Errorf("the stuck flow's event #%v arrived while its first hung", d.Payload.Data["sequence"])
		}
	}
	var attempted int
	if err := b.pool.QueryRow(context.Background(), `select count(*) from webhook_attempts a
		join webhook_events e on e.organization_id = a.organization_id and e.id = a.event_id
		where e.organization_id = $1 and e.flow_id = 'stuck'`, b.org).Scan(&attempted); err != nil {
		t.Fatal(err)
	}
	if attempted != 0 {
		t.Errorf("the stuck flow has %d attempts recorded while its first hangs, want 0", attempted)
	}

	unblock()
	eventually(t, "the stuck flow delivered", func() bool { return deliveryStates(t, b)["delivered"] == 16 })
	for _, v := range check.Violations() {
		t.Error(v)
	}
	var got []any
	for _, d := range r.Deliveries() {
		if d.Payload.Data["flowId"] == "stuck" {
			got = append(got, d.Payload.Data["sequence"])
		}
	}
	if fmt.Sprint(got) != "[1 2 3 4]" {
		t.Errorf("the stuck flow's events arrived as %v, want [1 2 3 4]", got)
	}
}

// TestOrderingOffReleasesHeldDeliveries: turning an endpoint's ordering
// off sends the deliveries it held at once, rather than when they would
// have looked again.
func TestOrderingOffReleasesHeldDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *webhooks.Options) { o.Timeout = time.Minute })
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	r := newReceiver(t, b.secret)
	t.Cleanup(unblock) // before the receiver closes, which waits for the hung request
	r.respond = func(d delivery, _ int) int {
		if d.Payload.Data["sequence"] == 1.0 {
			<-release
		}
		return http.StatusOK
	}
	e := orderedEndpoint(t, b, r)
	publishFlows(t, b, []string{"flow-1"}, 3)
	// Held, and their snoozes recorded: River records a job's end a moment
	// after the worker returns, and a job still running cannot be moved.
	eventually(t, "two deliveries held", func() bool {
		rows, err := b.pool.Query(context.Background(), `select id::text from webhook_events
			where organization_id = $1 and held`, b.org)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if jobState(t, b.pool, id) != "scheduled" {
				return false
			}
		}
		return len(ids) == 2
	})
	endpoints := webhooks.NewEndpoints(b.pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	none := webhooks.Unordered
	if _, err := endpoints.Update(context.Background(), b.org, e.ID, webhooks.EndpointUpdate{Ordering: &none}, etag.Any); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the held deliveries sent while the first still hangs", func() bool { return r.Arrived() == 3 })
	unblock()
}
