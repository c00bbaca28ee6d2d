package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
)

// stuckFlows is how many flows the webhook-ordered scenario leaves hanging.
const stuckFlows = 3

// throttleRate and throttleBacklog are the webhook-throttle scenario's
// endpoint's limit, in deliveries a second, and its backlog: more than the
// limit lets through in the scenario's window.
const (
	throttleRate    = 50
	throttleBacklog = 5_000
)

// throttleWindow is the least the webhook-throttle scenario runs for.
const throttleWindow = 20 * time.Second

// createEndpoint registers an endpoint of o's with the API body and
// returns its id.
func (b *bench) createEndpoint(ctx context.Context, o org, body map[string]any) (string, error) {
	raw, _ := json.Marshal(body)
	out, err := b.do(ctx, o, "POST", "/api/webhook-endpoints", raw, 201)
	if err != nil {
		return "", err
	}
	var endpoint struct {
		ID string `json:"id"`
	}
	return endpoint.ID, json.Unmarshal(out, &endpoint)
}

// dropEndpoint deletes an endpoint and cancels its pending deliveries and
// their jobs, so that the scenarios after one do not meet them.
func (b *bench) dropEndpoint(ctx context.Context, o org, id string) error {
	if _, err := b.do(ctx, o, "DELETE", "/api/webhook-endpoints/"+id, nil, 200); err != nil {
		return err
	}
	_, err := b.exec(ctx, `with dropped as (
			update webhook_events set state = 'cancelled', finished_at = now()
			where endpoint_id = $1 and state = 'pending' returning job_id)
		delete from river_job where id in (select job_id from dropped) and state <> 'running'`, id)
	return err
}

// webhookOrderedScenario measures an endpoint with per-flow ordering while
// some of its flows hang: stuckFlows flows are created and cancelled, and
// the receiver holds the delivery of each one's flow.created for stuckFor
// and fails it, every time, so that their flow.cancelled waits behind it,
// held. Meanwhile flows are created as in the webhook scenario,
// each delivered only to the endpoint, and their time from 201 to receipt
// is measured: a hanging flow should delay only itself.
func webhookOrderedScenario(ctx context.Context, b *bench) (Result, error) {
	rcv, err := startReceiver(false)
	if err != nil {
		return Result{}, err
	}
	defer rcv.close()
	endpointID, err := b.createEndpoint(ctx, b.main, map[string]any{"url": rcv.url, "ordering": "per-flow",
		"eventTypes": []string{"flow.created", "flow.cancelled"}})
	if err != nil {
		return Result{}, err
	}
	var warm atomic.Int64
	if err := b.warmUp(ctx, rcv, func(_, _ int) (loadgen.Request, error) {
		return b.main.request("POST", "/api/flows", createBody(32_000_000+int(warm.Add(1)), ""), 201)
	}); err != nil {
		return Result{}, err
	}
	heldBefore := b.metric(ctx, "flowd_webhook_deliveries_held_in_order_total")
	rcv.mu.Lock()
	rcv.hangAll, rcv.hangFlows = true, map[string]bool{}
	rcv.mu.Unlock()
	for i := range stuckFlows {
		out, err := b.do(ctx, b.main, "POST", "/api/flows", createBody(30_000_000+i, ""), 201)
		if err != nil {
			return Result{}, err
		}
		var created struct {
			FlowID string `json:"flowId"`
		}
		if err := json.Unmarshal(out, &created); err != nil {
			return Result{}, err
		}
		if _, err := b.do(ctx, b.main, "POST", "/api/flows/"+created.FlowID+"/cancel", []byte(`{}`), 200); err != nil {
			return Result{}, err
		}
		rcv.mu.Lock()
		rcv.hangFlows[created.FlowID] = true
		rcv.mu.Unlock()
	}
	for start := time.Now(); time.Since(start) < receiptWait; time.Sleep(20 * time.Millisecond) {
		rcv.mu.Lock()
		holding := rcv.holding
		rcv.mu.Unlock()
		if holding >= stuckFlows {
			break
		}
	}
	rcv.mu.Lock()
	rcv.hangAll = false
	rcv.mu.Unlock()

	warmed := rcv.count()
	created := newCreations()
	var n atomic.Int64
	var s sample
	b.driveSlice(ctx, &s, b.o.duration, func(_, _ int) (loadgen.Request, error) {
		req, err := b.main.request("POST", "/api/flows", createBody(31_000_000+int(n.Add(1)), ""), 201)
		req.Done = created.note
		return req, err
	})
	cr := s.result("webhook-ordered", b.o.concurrency)
	inWindow := rcv.count() - warmed
	lat, missing := created.receipts(rcv)
	held := b.metric(ctx, "flowd_webhook_deliveries_held_in_order_total") - heldBefore
	rcv.mu.Lock()
	calls := rcv.calls
	rcv.mu.Unlock()

	r := withLatencies(Result{Scenario: "webhook-ordered", Concurrency: b.o.concurrency, Seconds: b.o.duration.Seconds(),
		Errors: cr.Errors + missing, FirstError: cr.FirstError, CreatesPerSec: cr.RPS,
		DeliveriesPerSec: float64(inWindow) / b.o.duration.Seconds()}, lat)
	r.RPS = r.DeliveriesPerSec
	r.FlowdCPUus, r.PostgresCPUus, r.LoadCPUus, r.FlowdAllocs = cr.FlowdCPUus, cr.PostgresCPUus, cr.LoadCPUus, cr.FlowdAllocs
	if missing > 0 && r.FirstError == "" {
		r.FirstError = fmt.Sprintf("%d events not delivered within %s of the run's end", missing, receiptWait)
	}
	b.note("webhook-ordered: %.0f creates/s to an endpoint with per-flow ordering while %d flows hang at it "+
		"(%d requests held %s and failed, their later events held in order %.0f times); the other flows got %.0f deliveries/s "+
		"(%s of creates), p50 %.1f ms, p99 %.1f ms from 201 to receipt (target: p50 < 100 ms %s, keeping up %s)",
		cr.RPS, stuckFlows, calls, stuckFor, held, r.DeliveriesPerSec, pct(r.DeliveriesPerSec, cr.RPS), r.P50ms, r.P99ms,
		check(len(lat) > 0 && r.P50ms < 100), check(missing == 0 && r.DeliveriesPerSec >= 0.95*cr.RPS))
	return r, b.dropEndpoint(ctx, b.main, endpointID)
}

// webhookThrottleScenario seeds an endpoint throttled to throttleRate
// deliveries a second with throttleBacklog due deliveries, as
// webhook-backlog does, and meanwhile creates flows at backlogRate with a
// webhookUrl on another receiver for throttleWindow: it measures the
// fresh flows' time from 201 to receipt, and the rate at which the
// throttled receiver got its backlog.
func webhookThrottleScenario(ctx context.Context, b *bench) (Result, error) {
	small, err := startReceiver(false)
	if err != nil {
		return Result{}, err
	}
	defer small.close()
	rcv, err := startReceiver(false)
	if err != nil {
		return Result{}, err
	}
	defer rcv.close()
	owner, err := b.seedOrg(ctx, "Throttle Bank", "THRT")
	if err != nil {
		return Result{}, err
	}
	endpointURL := small.base + "/backlog"
	endpointID, err := b.createEndpoint(ctx, owner, map[string]any{"url": endpointURL, "eventTypes": []string{"flow.created"},
		"rateLimit": throttleRate})
	if err != nil {
		return Result{}, err
	}
	u, _ := url.Parse(endpointURL)
	if err := b.seedBacklog(ctx, owner.ID, endpointID, endpointURL, u.Host, throttleBacklog); err != nil {
		return Result{}, fmt.Errorf("seed the backlog: %w", err)
	}
	due := time.Now()
	window := max(b.o.duration, throttleWindow)
	created := newCreations()
	fresh := b.paced(ctx, backlogRate, func() bool { return time.Since(due) > window }, rcv.url, created).
		result("webhook-throttle-create", 0)
	elapsed := time.Since(due)
	small.mu.Lock()
	got := small.others
	small.mu.Unlock()
	lat, missing := created.receipts(rcv)

	r := withLatencies(Result{Scenario: "webhook-throttle", Seconds: elapsed.Seconds(), Errors: fresh.Errors + missing,
		FirstError: fresh.FirstError, CreatesPerSec: fresh.RPS, DeliveriesPerSec: float64(got) / elapsed.Seconds()}, lat)
	r.RPS = r.DeliveriesPerSec
	if missing > 0 && r.FirstError == "" {
		r.FirstError = fmt.Sprintf("%d fresh events not delivered within %s of the run's end", missing, receiptWait)
	}
	// The throttle may start a second's worth at once: its first slot is
	// at the backlog's start.
	limitHeld := float64(got) <= throttleRate*(elapsed.Seconds()+1)
	b.note("webhook-throttle: an endpoint throttled to %d deliveries/s with %d due got %d in %.1f s (%.1f/s, within its limit %s), "+
		"while %d fresh creates, %.0f a second, to another receiver took p50 %.1f ms, p99 %.1f ms from 201 to receipt (target: p50 < 100 ms %s)",
		throttleRate, throttleBacklog, got, elapsed.Seconds(), r.DeliveriesPerSec, check(limitHeld),
		fresh.Requests, fresh.RPS, r.P50ms, r.P99ms, check(len(lat) > 0 && r.P50ms < 100))
	return r, b.dropEndpoint(ctx, owner, endpointID)
}
