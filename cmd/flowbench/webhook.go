package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
)

// receiver is a local webhook endpoint. It notes when each flow's
// flow.created event arrives at /hook and counts what arrives at its other
// paths; a hanging one answers nothing, holding each request until flowd
// gives up on it.
type receiver struct {
	mu       sync.Mutex
	received map[string]time.Time // flow id → first receipt
	others   int                  // requests to other paths
	lastAt   time.Time            // the last of them
	// A hanging receiver's requests: all so far, held now, most held at once.
	calls, holding, most int
	// hangAll and hangFlows make the receiver hang, as hang does, on every
	// request or on those of some flows.
	hangAll   bool
	hangFlows map[string]bool

	srv  *http.Server
	base string // http://127.0.0.1:port
	url  string // base/hook
	stop chan struct{}
}

func startReceiver(hang bool) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	r := &receiver{received: map[string]time.Time{}, base: base, url: base + "/hook", stop: make(chan struct{})}
	serve := r.answer
	if hang {
		serve = r.hang
	}
	r.srv = &http.Server{Handler: http.HandlerFunc(serve)}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) answer(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(req.Body)
	if req.URL.Path != "/hook" {
		r.mu.Lock()
		r.others++
		r.lastAt = at
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var ev struct {
		Type string `json:"type"`
		Data struct {
			FlowID string `json:"flowId"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) == nil && r.hangs(ev.Data.FlowID) {
		r.hangThenFail(w, req)
		return
	}
	if json.Unmarshal(body, &ev) == nil && ev.Type == "flow.created" {
		r.mu.Lock()
		if _, seen := r.received[ev.Data.FlowID]; !seen {
			r.received[ev.Data.FlowID] = at
		}
		r.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// hang holds a request until its client gives up or the receiver closes.
// It reads the body first: only then does the server watch the connection
// and end the request's context when the client hangs up.
func (r *receiver) hang(_ http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.calls++
	r.holding++
	r.most = max(r.most, r.holding)
	r.mu.Unlock()
	select {
	case <-req.Context().Done():
	case <-r.stop:
	}
	r.mu.Lock()
	r.holding--
	r.mu.Unlock()
}

// stuckFor is how long the receiver holds a request of a flow it hangs
// on before it answers 503: less than flowd's timeout (10 s), so that the
// flow fails and is retried without the host's circuit opening, which would
// hold back every flow's deliveries to it.
const stuckFor = 8 * time.Second

// hangThenFail holds a request as hang does, for stuckFor at most, and
// then answers 503.
func (r *receiver) hangThenFail(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.calls++
	r.holding++
	r.most = max(r.most, r.holding)
	r.mu.Unlock()
	select {
	case <-req.Context().Done():
	case <-r.stop:
	case <-time.After(stuckFor):
	}
	r.mu.Lock()
	r.holding--
	r.mu.Unlock()
	w.WriteHeader(http.StatusServiceUnavailable)
}

// hangs reports whether the receiver hangs on a request of flowID.
func (r *receiver) hangs(flowID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hangAll || r.hangFlows[flowID]
}

func (r *receiver) close() {
	close(r.stop)
	_ = r.srv.Close()
}

// missing counts the flows of created whose event has not arrived.
func (r *receiver) missing(created map[string]time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id := range created {
		if _, ok := r.received[id]; !ok {
			n++
		}
	}
	return n
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.received)
}

// receiptWait bounds the wait for fresh events after a scenario's creates end.
const receiptWait = 10 * time.Second

// creations notes when each create's 201 came, by flow id.
type creations struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newCreations() *creations { return &creations{at: map[string]time.Time{}} }

// note is a request's done: it takes the flow id from the answer.
func (c *creations) note(body []byte) error {
	at := time.Now()
	var created struct {
		FlowID string `json:"flowId"`
	}
	if err := json.Unmarshal(body, &created); err != nil {
		return err
	}
	c.mu.Lock()
	c.at[created.FlowID] = at
	c.mu.Unlock()
	return nil
}

// receipts waits up to receiptWait for every created flow's flow.created at
// r, then returns the times from 201 to receipt, sorted, and how many never
// came.
func (c *creations) receipts(r *receiver) (lat []time.Duration, missing int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for start := time.Now(); r.missing(c.at) > 0 && time.Since(start) < receiptWait; {
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, at := range c.at {
		got, ok := r.received[id]
		if !ok {
			missing++
			continue
		}
		lat = append(lat, max(0, got.Sub(at)))
	}
	slices.Sort(lat)
	return lat, missing
}

// withLatencies fills in r's percentiles from sorted latencies.
func withLatencies(r Result, lat []time.Duration) Result {
	r.Requests = len(lat)
	if len(lat) > 0 {
		r.P50ms, r.P99ms, r.MaxMs = ms(loadgen.Percentile(lat, 0.50)), ms(loadgen.Percentile(lat, 0.99)), ms(lat[len(lat)-1])
	}
	return r
}

// warmUpFor is how long a webhook scenario creates flows before the run it
// measures.
const warmUpFor = 3 * time.Second

// warmUp drives next for warmUpFor, waits for the deliveries it made to
// arrive at r, and analyzes the database. A database made seconds before has
// no statistics: PostgreSQL plans with its tables' first rows, and keeps
// those plans for the prepared statements while the tables grow, until
// autovacuum analyzes them, within a minute, longer than a scenario. A
// deployment's tables have statistics, and so has a scenario after warmUp.
func (b *bench) warmUp(ctx context.Context, r *receiver, next loadgen.Next) error {
	created := newCreations()
	var s sample
	b.driveSlice(ctx, &s, warmUpFor, func(w, i int) (loadgen.Request, error) {
		req, err := next(w, i)
		req.Done = created.note
		return req, err
	})
	created.receipts(r)
	_, err := b.exec(ctx, "analyze")
	return err
}

// webhookScenario creates flows with a webhookUrl on a local receiver for
// the run's duration and measures deliveries: how many arrived per second
// while creates went on, and the time from the create's 201 (its commit is
// just before) to the receipt, p50/p99/max. Creates that were not delivered
// within ten seconds after the run count as errors.
func webhookScenario(ctx context.Context, b *bench) (Result, error) {
	rcv, err := startReceiver(false)
	if err != nil {
		return Result{}, err
	}
	defer rcv.close()
	if err := b.warmUp(ctx, rcv, func(w, i int) (loadgen.Request, error) {
		return b.main.request("POST", "/api/flows", createBody(40_000_000+w*1_000_000+i, rcv.url), 201)
	}); err != nil {
		return Result{}, err
	}
	warmed := rcv.count()
	created := newCreations()
	start := time.Now()
	cr := b.drive(ctx, "webhook-create", func(w, i int) (loadgen.Request, error) {
		req, err := b.main.request("POST", "/api/flows", createBody(w*1_000_000+i, rcv.url), 201)
		req.Done = created.note
		return req, err
	})
	window := time.Since(start)
	inWindow := rcv.count() - warmed
	drainStart := time.Now()
	lat, missing := created.receipts(rcv)
	drain := time.Since(drainStart)
	r := withLatencies(Result{Scenario: "webhook", Concurrency: b.o.concurrency, Seconds: window.Seconds(),
		Errors: cr.Errors + missing, FirstError: cr.FirstError,
		CreatesPerSec: cr.RPS, DeliveriesPerSec: float64(inWindow) / window.Seconds(), DrainSeconds: drain.Seconds()}, lat)
	r.RPS = r.DeliveriesPerSec
	// CPU is per create: each create makes one delivery.
	r.FlowdCPUus, r.PostgresCPUus, r.LoadCPUus, r.FlowdAllocs = cr.FlowdCPUus, cr.PostgresCPUus, cr.LoadCPUus, cr.FlowdAllocs
	if missing > 0 && r.FirstError == "" {
		r.FirstError = fmt.Sprintf("%d events not delivered within %s of the run's end", missing, receiptWait)
	}
	b.note("webhook: %.0f creates/s acknowledged, %.0f deliveries/s during the run (%s of creates), backlog drained in %.1f s; latency is 201 → receipt",
		cr.RPS, r.DeliveriesPerSec, pct(r.DeliveriesPerSec, cr.RPS), drain.Seconds())
	pg, err := b.startPgbench(ctx, map[string]string{"client": b.main.ClientID}, "webhook")
	if err != nil {
		return r, err
	}
	defer pg.Kill()
	if err := b.pgbenchTurn(pg, b.o.duration); err != nil {
		return r, err
	}
	run, pgCPU, err := pg.Finish()
	if err != nil {
		return r, err
	}
	res := withPgbench(r, run, pgCPU)
	// pgbench's jobs sit in a queue flowd does not work; remove them.
	_, _ = b.exec(ctx, `delete from river_job where queue = 'pgbench'`)
	return res, nil
}
