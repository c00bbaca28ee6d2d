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
)

// receiver is a local webhook endpoint that notes when each flow's
// flow.created event arrives.
type receiver struct {
	mu       sync.Mutex
	received map[string]time.Time // flow id → first receipt
	srv      *http.Server
	url      string
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{received: map[string]time.Time{}, url: "http://" + ln.Addr().String() + "/hook"}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		var ev struct {
			Type string `json:"type"`
			Data struct {
				FlowID string `json:"flowId"`
			} `json:"data"`
		}
		body, _ := io.ReadAll(req.Body)
		if json.Unmarshal(body, &ev) == nil && ev.Type == "flow.created" {
			r.mu.Lock()
			if _, seen := r.received[ev.Data.FlowID]; !seen {
				r.received[ev.Data.FlowID] = at
			}
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
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

// webhookScenario creates flows with a webhookUrl on a local receiver for
// the run's duration and measures deliveries: how many arrived per second
// while creates went on, and the time from the create's 201 (its commit is
// just before) to the receipt, p50/p99/max. Creates that were not delivered
// within ten seconds after the run count as errors.
func webhookScenario(ctx context.Context, b *bench) (Result, error) {
	rcv, err := startReceiver()
	if err != nil {
		return Result{}, err
	}
	defer rcv.srv.Close()
	var (
		mu      sync.Mutex
		created = map[string]time.Time{} // flow id → 201 received
	)
	start := time.Now()
	cr := b.drive(ctx, "webhook-create", func(w, i int) (request, error) {
		req, err := b.main.request("POST", "/api/flows", createBody(w*1_000_000+i, rcv.url), 201)
		req.done = func(body []byte) error {
			at := time.Now()
			var c struct {
				FlowID string `json:"flowId"`
			}
			if err := json.Unmarshal(body, &c); err != nil {
				return err
			}
			mu.Lock()
			created[c.FlowID] = at
			mu.Unlock()
			return nil
		}
		return req, err
	})
	window := time.Since(start)
	inWindow := rcv.count()
	// Let the backlog drain, up to ten seconds.
	drainStart := time.Now()
	for rcv.missing(created) > 0 && time.Since(drainStart) < 10*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	drain := time.Since(drainStart)

	rcv.mu.Lock()
	var lat []time.Duration
	missing := 0
	for id, at := range created {
		got, ok := rcv.received[id]
		if !ok {
			missing++
			continue
		}
		lat = append(lat, max(0, got.Sub(at)))
	}
	rcv.mu.Unlock()
	slices.Sort(lat)
	r := Result{Scenario: "webhook", Concurrency: b.o.concurrency, Seconds: window.Seconds(), Requests: len(lat),
		Errors: cr.Errors + missing, FirstError: cr.FirstError,
		CreatesPerSec: cr.RPS, DeliveriesPerSec: float64(inWindow) / window.Seconds(), DrainSeconds: drain.Seconds()}
	r.RPS = r.DeliveriesPerSec
	// CPU is per create: each create makes one delivery.
	r.FlowdCPUus, r.PostgresCPUus, r.LoadCPUus, r.FlowdAllocs = cr.FlowdCPUus, cr.PostgresCPUus, cr.LoadCPUus, cr.FlowdAllocs
	if len(lat) > 0 {
		r.P50ms, r.P99ms, r.MaxMs = ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99)), ms(lat[len(lat)-1])
	}
	if missing > 0 && r.FirstError == "" {
		r.FirstError = fmt.Sprintf("%d events not delivered within 10 s of the run's end", missing)
	}
	b.note("webhook: %.0f creates/s acknowledged, %.0f deliveries/s during the run (%s of creates), backlog drained in %.1f s; latency is 201 → receipt",
		cr.RPS, r.DeliveriesPerSec, pct(r.DeliveriesPerSec, cr.RPS), drain.Seconds())
	pg, err := b.startPgbench(ctx, map[string]string{"client": b.main.ClientID}, "webhook")
	if err != nil {
		return r, err
	}
	defer pg.kill()
	if err := b.pgbenchTurn(pg, b.o.duration); err != nil {
		return r, err
	}
	run, pgCPU, err := pg.finish()
	if err != nil {
		return r, err
	}
	res := withPgbench(r, run, pgCPU)
	// pgbench's jobs sit in a queue flowd does not work; remove them.
	_, _ = b.exec(ctx, `delete from river_job where queue = 'pgbench'`)
	return res, nil
}
