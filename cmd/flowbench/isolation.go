package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
	"github.com/jackc/pgx/v5"
)

// isolationWindow is the least the webhook-isolation scenario creates for:
// three of flowd's default timeouts, so that the hanging receiver's first
// deliveries time out and its circuit opens within the run.
const isolationWindow = 30 * time.Second

// backlogRate is the rate of fresh creates while the backlog drains, a
// moderate one: about a tenth of what this machine creates with a delivery each.
const backlogRate = 50

// backlogDeadline bounds the wait for the backlog to drain.
const backlogDeadline = 10 * time.Minute

func check(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// webhookIsolationScenario creates flows with a webhookUrl for at least
// isolationWindow, every fifth on a receiver that hangs until flowd's
// timeout gives up (FLOWD_WEBHOOK_TIMEOUT, 10 s unless -env sets it) and
// the others on a healthy receiver, and measures the healthy receiver's
// deliveries as the webhook scenario does: their rate beside the rate of
// their creates, and the time from 201 to receipt.
func webhookIsolationScenario(ctx context.Context, b *bench) (Result, error) {
	healthy, err := startReceiver(false)
	if err != nil {
		return Result{}, err
	}
	defer healthy.close()
	hanging, err := startReceiver(true)
	if err != nil {
		return Result{}, err
	}
	defer hanging.close()
	if err := b.warmUp(ctx, healthy, func(w, i int) (loadgen.Request, error) {
		return b.main.request("POST", "/api/flows", createBody(50_000_000+w*1_000_000+i, healthy.url), 201)
	}); err != nil {
		return Result{}, err
	}
	warmed := healthy.count()
	created := newCreations()
	var n atomic.Int64
	heldBefore := b.metric(ctx, "flowd_webhook_deliveries_held_total")
	window := max(b.o.duration, isolationWindow)
	var s sample
	b.driveSlice(ctx, &s, window, func(_, _ int) (loadgen.Request, error) {
		i := int(n.Add(1))
		if i%5 == 0 {
			return b.main.request("POST", "/api/flows", createBody(i, hanging.url), 201)
		}
		req, err := b.main.request("POST", "/api/flows", createBody(i, healthy.url), 201)
		req.Done = created.note
		return req, err
	})
	cr := s.result("webhook-isolation", b.o.concurrency)
	inWindow := healthy.count() - warmed
	drainStart := time.Now()
	lat, missing := created.receipts(healthy)
	drain := time.Since(drainStart)
	held := b.metric(ctx, "flowd_webhook_deliveries_held_total") - heldBefore
	hanging.mu.Lock()
	calls, most := hanging.calls, hanging.most
	hanging.mu.Unlock()

	r := withLatencies(Result{Scenario: "webhook-isolation", Concurrency: b.o.concurrency, Seconds: window.Seconds(),
		Errors: cr.Errors + missing, FirstError: cr.FirstError, CreatesPerSec: cr.RPS,
		DeliveriesPerSec: float64(inWindow) / window.Seconds(), DrainSeconds: drain.Seconds()}, lat)
	r.RPS = r.DeliveriesPerSec
	// CPU is per create, as in the webhook scenario.
	r.FlowdCPUus, r.PostgresCPUus, r.LoadCPUus, r.FlowdAllocs = cr.FlowdCPUus, cr.PostgresCPUus, cr.LoadCPUus, cr.FlowdAllocs
	if missing > 0 && r.FirstError == "" {
		r.FirstError = fmt.Sprintf("%d events to the healthy receiver not delivered within %s of the run's end", missing, receiptWait)
	}
	healthyCreates := cr.RPS * 4 / 5
	b.note("webhook-isolation: %.0f creates/s for %s, a fifth to a receiver that hangs until flowd's timeout; "+
		"the healthy receiver got %.0f deliveries/s (%s of its creates), p50 %.1f ms, p99 %.1f ms from 201 to receipt "+
		"(target: p50 < 100 ms %s, keeping up %s); the hanging one got %d requests, at most %d at once, and flowd held back %.0f deliveries",
		cr.RPS, window, r.DeliveriesPerSec, pct(r.DeliveriesPerSec, healthyCreates), r.P50ms, r.P99ms,
		check(len(lat) > 0 && r.P50ms < 100), check(missing == 0 && r.DeliveriesPerSec >= 0.95*healthyCreates), calls, most, held)
	// The hanging receiver's deliveries would go on being held and probed
	// through the scenarios after this one: cancel them.
	if _, err := b.exec(ctx, `with held as (
			update webhook_events set state = 'cancelled', finished_at = now() where url = $1 and state = 'pending' returning job_id)
		delete from river_job where id in (select job_id from held) and state <> 'running'`, hanging.url); err != nil {
		return r, fmt.Errorf("cancel the hanging receiver's deliveries: %w", err)
	}
	return r, nil
}

// webhookBacklogScenario seeds an organization's endpoint with o.backlog
// deliveries that failed once during an outage and whose retries are due,
// as flowd would have stored them (events, deliveries, their attempts and
// River jobs, in one transaction), then measures how fast flowd drains them
// while fresh flows are created at backlogRate with a webhookUrl on the same
// receiver, and the time from those creates' 201 to their receipt.
func webhookBacklogScenario(ctx context.Context, b *bench) (Result, error) {
	rcv, err := startReceiver(false)
	if err != nil {
		return Result{}, err
	}
	defer rcv.close()
	owner, err := b.seedOrg(ctx, "Backlog Bank", "BKLG")
	if err != nil {
		return Result{}, err
	}
	endpointURL := rcv.base + "/backlog"
	body, _ := json.Marshal(map[string]any{"url": endpointURL, "eventTypes": []string{"flow.created"}})
	out, err := b.do(ctx, owner, "POST", "/api/webhook-endpoints", body, 201)
	if err != nil {
		return Result{}, err
	}
	var endpoint struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &endpoint); err != nil {
		return Result{}, err
	}
	u, _ := url.Parse(endpointURL)
	seedStart := time.Now()
	if err := b.seedBacklog(ctx, owner.ID, endpoint.ID, endpointURL, u.Host, b.o.backlog); err != nil {
		return Result{}, fmt.Errorf("seed the backlog: %w", err)
	}
	due := time.Now()
	b.note("webhook-backlog: seeded %d deliveries with due retries in %s", b.o.backlog, due.Sub(seedStart).Round(100*time.Millisecond))

	before := b.cpuNow()
	created := newCreations()
	drained := func() bool { rcv.mu.Lock(); defer rcv.mu.Unlock(); return rcv.others >= b.o.backlog }
	fresh := b.paced(ctx, backlogRate, func() bool { return drained() || time.Since(due) > backlogDeadline },
		rcv.url, created).result("webhook-backlog-create", 0)
	cpu := b.cpuNow().sub(before)
	rcv.mu.Lock()
	backlog, last := rcv.others, rcv.lastAt
	rcv.mu.Unlock()
	drain := last.Sub(due)
	if backlog == 0 {
		drain = time.Since(due)
	}
	lat, missing := created.receipts(rcv)

	r := withLatencies(Result{Scenario: "webhook-backlog", Seconds: drain.Seconds(),
		Errors: fresh.Errors + missing + b.o.backlog - backlog, FirstError: fresh.FirstError,
		CreatesPerSec: fresh.RPS, DrainSeconds: drain.Seconds()}, lat)
	if drain > 0 {
		r.DeliveriesPerSec = float64(backlog) / drain.Seconds()
	}
	r.RPS = r.DeliveriesPerSec
	// CPU is per delivery of the backlog.
	r.FlowdCPUus, r.PostgresCPUus, r.LoadCPUus = perCall(cpu.flowd, float64(backlog)), perCall(cpu.postgres, float64(backlog)), perCall(cpu.load, float64(backlog))
	if r.FirstError == "" && backlog < b.o.backlog {
		r.FirstError = fmt.Sprintf("%d of %d backlog deliveries arrived within %s", backlog, b.o.backlog, backlogDeadline)
	}
	b.note("webhook-backlog: %d due deliveries drained in %.1f s, %.0f deliveries/s (target ≥ 1000 %s), "+
		"while %d fresh creates, %.0f a second, to the same receiver took p50 %.1f ms, p99 %.1f ms from 201 to receipt (target: p50 < 1 s %s)",
		backlog, drain.Seconds(), r.DeliveriesPerSec, check(backlog == b.o.backlog && r.DeliveriesPerSec >= 1000),
		fresh.Requests, fresh.RPS, r.P50ms, r.P99ms, check(len(lat) > 0 && r.P50ms < 1000))
	return r, nil
}

// paced creates flows with a webhookUrl on hookURL at rate a second, each
// create on its own, until stop says so, noting each 201 in created.
func (b *bench) paced(ctx context.Context, rate int, stop func() bool, hookURL string, created *creations) sample {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		s  sample
	)
	start := time.Now()
	for i := 0; !stop() && ctx.Err() == nil; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			body, err := b.do(ctx, b.main, "POST", "/api/flows", createBody(20_000_000+i, hookURL), 201)
			if err == nil {
				err = created.note(body)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.Errors++
				s.FirstErr = cmp.Or(s.FirstErr, err.Error())
				return
			}
			s.Latencies = append(s.Latencies, time.Since(sent))
		}()
	}
	wg.Wait()
	s.Elapsed = time.Since(start)
	return s
}

// seedBacklog stores the backlog and analyzes the tables it fills in one
// transaction, so that the backlog comes due at once, analyzed: an outage's
// worth of rows would have had autovacuum analyze them.
func (b *bench) seedBacklog(ctx context.Context, orgID, endpointID, endpointURL, host string, n int) error {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, backlogSeed, orgID, endpointID, endpointURL, host, n); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `analyze river_job, webhook_events, webhook_attempts, events`)
		return err
	})
}

// backlogSeed stores $5 deliveries of flow.created events of organization
// $1 to its endpoint $2 at URL $3 (host $4), as flowd stores them (the
// webhooks store's InsertEvent and InsertDeliveries, River's job insert),
// each with the failed first attempt of an outage ten minutes long and its
// River job available again at retry priority, its retry due: what River's
// scheduler leaves once the receiver is back. One statement, so the backlog
// comes due at once.
const backlogSeed = `
with seed as materialized (
	select i, gen_random_uuid() as event_id, gen_random_uuid() as delivery_id, gen_random_uuid()::text as flow_id,
		nextval('river_job_id_seq') as job_id, now() - interval '10 minutes' + i * (interval '10 minutes' / $5) as at
	from generate_series(1, $5::int) i
), body as materialized (
	select s.*, json_build_object('type', 'flow.created',
		'timestamp', to_char(s.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
		'data', json_build_object('flowId', s.flow_id, 'referenceId', 'BKLG-' || s.i, 'organizationId', $1::text,
			'status', 'Unopened', 'flowStatus', 'active', 'version', 1, 'sequence', 1, 'flowDefinitionId', 'consent'))::text as body
	from seed s
), event as (
	insert into events (organization_id, id, flow_id, sequence, type, body, created_at)
	select $1, event_id, flow_id, 1, 'flow.created', body, at from body
), job as (
	insert into river_job (id, args, attempt, attempted_at, attempted_by, created_at, errors, kind, max_attempts, metadata,
		priority, queue, state, scheduled_at, tags)
	select job_id, jsonb_build_object('organization_id', $1::text, 'event_id', delivery_id), 1, at, array['flowd'], at,
		array[jsonb_build_object('at', at, 'attempt', 1, 'error', 'Webhook delivery to ' || $4 || ' failed: connection refused', 'trace', '')],
		'flowd.webhook_delivery', 8, '{}', 2, 'webhooks', 'available', at + interval '5 seconds', '{}'
	from body
), delivery as (
	insert into webhook_events (id, organization_id, flow_id, task_id, type, url, body, last_error, job_id, created_at, event_id, endpoint_id)
	select delivery_id, $1, flow_id, '', 'flow.created', $3, body,
		'Webhook delivery to ' || $4 || ' failed: connection refused', job_id, at, event_id, $2::uuid
	from body
)
insert into webhook_attempts (organization_id, event_id, attempted_at, status_code, error, latency_us)
select $1, delivery_id, at, 0, 'connection refused', 200 from body`
