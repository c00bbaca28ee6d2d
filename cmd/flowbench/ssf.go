package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// ssfPeople is how many people share the ssf scenario's consents: each
// signs in once and accepts its share in a session of its own, side by side.
const ssfPeople = 8

// ssfWait bounds the wait for the healthy receiver's SETs after the
// withdrawals end.
const ssfWait = time.Minute

// pollDeadline bounds the poll stream's drain.
const pollDeadline = 5 * time.Minute

// ssfScenario: a data holder's receiver takes SETs by push while a second
// push stream of the same data holder goes to a receiver that accepts the
// connection and never answers, and a third stream waits to be polled.
// -ssf-consents accepted consents of a definition naming the holder's
// resource are withdrawn through the API by the run's clients, for the
// run's duration at most. Latency runs from the withdrawal's withdrawnAt,
// which flowd stamps inside the withdrawal's transaction, just before it
// commits, to the SET's arrival: the SET's event_timestamp and iat are
// whole seconds, too coarse for a target of one. Then the poll stream is
// filled to -poll-sets with verification SETs (POST /ssf/verify, each
// signed by flowd as a withdrawal's is) and drained by one receiver polling
// 1 000 at a time with acks; that row's req/s is SETs a second.
func ssfScenario(ctx context.Context, b *bench) (Result, error) {
	holder, err := b.benchHolder(ctx)
	if err != nil {
		return Result{}, err
	}
	healthy, err := startSETReceiver()
	if err != nil {
		return Result{}, err
	}
	defer healthy.close()
	hanging, err := startSilentReceiver()
	if err != nil {
		return Result{}, err
	}
	defer hanging.close()
	healthyID, err := b.createStream(ctx, holder, "urn:ietf:rfc:8935", healthy.url)
	if err != nil {
		return Result{}, err
	}
	hangingID, err := b.createStream(ctx, holder, "urn:ietf:rfc:8935", hanging.url)
	if err != nil {
		return Result{}, err
	}
	pollID, err := b.createStream(ctx, holder, "urn:ietf:rfc:8936", "")
	if err != nil {
		return Result{}, err
	}
	seedStart := time.Now()
	consents, err := b.acceptedConsents(ctx, "SSFBENCH", b.o.ssfConsents)
	if err != nil {
		return Result{}, fmt.Errorf("seed accepted consents: %w", err)
	}
	b.note("ssf: %d consents created through the API and accepted with the test eID by %d people in %s",
		len(consents), ssfPeople, time.Since(seedStart).Round(100*time.Millisecond))

	w := newWithdrawals()
	var next atomic.Int64
	var s sample
	start := time.Now()
	b.driveSlice(ctx, &s, b.o.duration, func(_, _ int) (loadgen.Request, error) {
		i := int(next.Add(1)) - 1
		if i >= len(consents) {
			return loadgen.Request{}, loadgen.ErrWorkerDone
		}
		req, err := b.main.request("POST", "/api/flows/"+consents[i]+"/withdraw", []byte(`{"reason":"flowbench"}`), 200)
		req.Done = w.note
		return req, err
	})
	window := time.Since(start)
	wr := s.result("ssf-withdraw", b.o.concurrency)
	ids := w.ids()
	inWindow, _ := healthy.arrived(ids)
	deadline := time.Now().Add(ssfWait)
	got, missing := healthy.arrived(ids)
	for ; missing > 0 && time.Now().Before(deadline); got, missing = healthy.arrived(ids) {
		time.Sleep(20 * time.Millisecond)
	}
	drain := time.Since(start) - window
	lat, fromAnswer := w.latencies(got)

	r := withLatencies(Result{Scenario: "ssf", Concurrency: b.o.concurrency, Seconds: window.Seconds(),
		Errors: wr.Errors + missing, FirstError: wr.FirstError, WithdrawalsPerSec: wr.RPS,
		DeliveriesPerSec: float64(len(inWindow)) / window.Seconds(), DrainSeconds: drain.Seconds()}, lat)
	r.RPS = r.DeliveriesPerSec
	// CPU is per withdrawal: each puts one SET on each of the three streams.
	r.FlowdCPUus, r.PostgresCPUus, r.LoadCPUus, r.FlowdAllocs = wr.FlowdCPUus, wr.PostgresCPUus, wr.LoadCPUus, wr.FlowdAllocs
	if missing > 0 && r.FirstError == "" {
		r.FirstError = fmt.Sprintf("%d SETs not at the healthy receiver within %s of the withdrawals' end", missing, ssfWait)
	}
	heldOnHanging, err := b.pendingSETs(ctx, holder.ID, hangingID)
	if err != nil {
		return r, err
	}
	answerP50 := 0.0
	if len(fromAnswer) > 0 {
		answerP50 = ms(loadgen.Percentile(fromAnswer, 0.50))
	}
	b.note("ssf: %d withdrawals in %.1f s (%.0f/s); the healthy push receiver got %d SETs of them (%d missing), %.0f/s during the run, "+
		"the rest within %.1f s after; from withdrawnAt to arrival p50 %.1f ms, p99 %.1f ms (targets: p50 < 1 s %s, p99 < 5 s %s; "+
		"from the withdrawal's 200 instead, p50 %.1f ms); the hanging receiver took %d connections and its stream holds %d SETs",
		len(ids), window.Seconds(), wr.RPS, len(got), missing, r.DeliveriesPerSec, drain.Seconds(), r.P50ms, r.P99ms,
		check(len(lat) > 0 && r.P50ms < 1000), check(len(lat) > 0 && missing == 0 && r.P99ms < 5000), answerP50, hanging.accepted(), heldOnHanging)
	// The push streams would go on being pushed, and the hanging one
	// retried, through the scenarios after this one.
	for _, id := range []string{healthyID, hangingID} {
		if _, err := b.do(ctx, holder, "DELETE", "/ssf/streams?stream_id="+id, nil, 204); err != nil {
			return r, fmt.Errorf("delete stream %s: %w", id, err)
		}
	}
	// A poll that fails is the poll row's error: the push figures stand.
	poll, err := b.pollThroughput(ctx, holder, pollID)
	if err != nil {
		poll = Result{Scenario: "ssf-poll", Errors: 1, FirstError: err.Error()}
	}
	poll.PeakRSSMiB = b.server.PeakRSSMiB()
	b.moreResults = append(b.moreResults, poll)
	return r, nil
}

// createStream creates a stream of holder's for consent-revoked events,
// delivered by method (to endpoint, for push), and returns its id.
func (b *bench) createStream(ctx context.Context, holder org, method, endpoint string) (string, error) {
	delivery := map[string]string{"method": method}
	if endpoint != "" {
		delivery["endpoint_url"] = endpoint
	}
	body, _ := json.Marshal(map[string]any{"delivery": delivery, "events_requested": []string{eventConsentRevoked},
		"description": "flowbench " + method})
	out, err := b.do(ctx, holder, "POST", "/ssf/streams", body, 201)
	if err != nil {
		return "", fmt.Errorf("create a stream: %w", err)
	}
	var stream struct {
		StreamID string `json:"stream_id"`
	}
	if err := json.Unmarshal(out, &stream); err != nil || stream.StreamID == "" {
		return "", fmt.Errorf("a created stream without its stream_id: %v %s", err, truncate(out, 200))
	}
	return stream.StreamID, nil
}

// acceptedConsents creates n flows of benchDefinition through the API,
// has ssfPeople people (national ids prefix1, prefix2…) accept them with the
// test eID, each their share in a session of its own, and returns the
// flows' ids.
func (b *bench) acceptedConsents(ctx context.Context, prefix string, n int) ([]string, error) {
	people := make([]string, n)
	for i := range people {
		people[i] = prefix + strconv.Itoa(i%ssfPeople+1)
	}
	links, err := b.createConsents(ctx, people)
	if err != nil {
		return nil, err
	}
	g, gctx := errgroup.WithContext(ctx)
	for p := range min(ssfPeople, n) {
		var hrefs []string
		for i := p; i < n; i += ssfPeople {
			hrefs = append(hrefs, links[i].href)
		}
		g.Go(func() error {
			_, err := b.acceptAs(gctx, prefix+strconv.Itoa(p+1), hrefs)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	ids := make([]string, n)
	for i, l := range links {
		ids[i] = l.flowID
	}
	return ids, nil
}

// withdrawals notes each withdrawal's withdrawnAt and when its 200 came.
type withdrawals struct {
	mu       sync.Mutex
	at       map[string]time.Time // flow id → withdrawnAt
	answered map[string]time.Time
}

func newWithdrawals() *withdrawals {
	return &withdrawals{at: map[string]time.Time{}, answered: map[string]time.Time{}}
}

// note is a withdrawal's done: the flow's envelope.
func (w *withdrawals) note(body []byte) error {
	now := time.Now()
	var answer struct {
		Flow struct {
			FlowID  string `json:"flowId"`
			Consent struct {
				WithdrawnAt *time.Time `json:"withdrawnAt"`
			} `json:"consent"`
		} `json:"flow"`
	}
	f := &answer.Flow
	if err := json.Unmarshal(body, &answer); err != nil || f.Consent.WithdrawnAt == nil {
		return fmt.Errorf("a withdrawal's answer without consent.withdrawnAt: %v %s", err, truncate(body, 200))
	}
	w.mu.Lock()
	w.at[f.FlowID], w.answered[f.FlowID] = *f.Consent.WithdrawnAt, now
	w.mu.Unlock()
	return nil
}

func (w *withdrawals) ids() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.at))
	for id := range w.at {
		ids = append(ids, id)
	}
	return ids
}

// latencies are the times from withdrawnAt, and from the 200, to each
// arrival in got, sorted.
func (w *withdrawals) latencies(got map[string]time.Time) (fromWithdrawn, fromAnswer []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, arrived := range got {
		fromWithdrawn = append(fromWithdrawn, max(0, arrived.Sub(w.at[id])))
		fromAnswer = append(fromAnswer, max(0, arrived.Sub(w.answered[id])))
	}
	slices.Sort(fromWithdrawn)
	slices.Sort(fromAnswer)
	return fromWithdrawn, fromAnswer
}

// pendingSETs counts the SETs a stream holds unacknowledged.
func (b *bench) pendingSETs(ctx context.Context, orgID, streamID string) (int, error) {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `select count(*) from ssf_sets where organization_id = $1 and stream_id = $2 and state = 'pending'`,
		orgID, streamID).Scan(&n)
	return n, err
}

// pollThroughput fills the poll stream to -poll-sets pending SETs with
// verification events, through the API with the run's clients, then drains
// it as one receiver would: polls of up to 1 000, each acknowledging the
// one before, until nothing more is available. req/s is SETs a second of
// the drain; latencies are the polls'.
func (b *bench) pollThroughput(ctx context.Context, holder org, streamID string) (Result, error) {
	before, err := b.pendingSETs(ctx, holder.ID, streamID)
	if err != nil {
		return Result{}, err
	}
	fill := max(0, b.o.pollSETs-before)
	fillStart := time.Now()
	var n atomic.Int64
	body, _ := json.Marshal(map[string]string{"stream_id": streamID, "state": "flowbench"})
	f := b.load.Drive(ctx, pollDeadline, func(_, _ int) (loadgen.Request, error) {
		if int(n.Add(1)) > fill {
			return loadgen.Request{}, loadgen.ErrWorkerDone
		}
		return holder.request("POST", "/ssf/verify", body, 204)
	})
	if f.Errors > 0 {
		return Result{}, fmt.Errorf("%d verification requests failed, the first: %s", f.Errors, f.FirstErr)
	}
	pending, err := b.pendingSETs(ctx, holder.ID, streamID)
	if err != nil {
		return Result{}, err
	}
	took := time.Since(fillStart)
	b.note("ssf-poll: the poll stream held %d SETs of the withdrawals; %d verification SETs put on it through POST /ssf/verify in %.1f s (%.0f/s) made %d",
		before, fill, took.Seconds(), float64(fill)/took.Seconds(), pending)

	var s sample
	seen := make(map[string]bool, pending)
	duplicates := 0
	var ack []string
	start := time.Now()
	for more := true; more; {
		if time.Since(start) > pollDeadline {
			return Result{}, fmt.Errorf("%d of %d SETs polled within %s", len(seen), pending, pollDeadline)
		}
		sent := time.Now()
		maxEvents := 1000
		if len(seen) >= pending {
			maxEvents = 0 // only acknowledges the last batch
		}
		req, _ := json.Marshal(map[string]any{"maxEvents": maxEvents, "returnImmediately": true, "ack": ack})
		out, err := b.do(ctx, holder, "POST", "/ssf/poll/"+streamID, req, 200)
		if err != nil {
			return Result{}, err
		}
		var answer struct {
			SETs          map[string]string `json:"sets"`
			MoreAvailable bool              `json:"moreAvailable"`
		}
		if err := json.Unmarshal(out, &answer); err != nil {
			return Result{}, fmt.Errorf("a poll's answer: %w: %s", err, truncate(out, 200))
		}
		s.Latencies = append(s.Latencies, time.Since(sent))
		ack = ack[:0]
		for jti := range answer.SETs {
			if seen[jti] {
				duplicates++
			}
			seen[jti] = true
			ack = append(ack, jti)
		}
		more = (answer.MoreAvailable && maxEvents > 0) || len(ack) > 0
	}
	elapsed := time.Since(start)
	s.Elapsed = elapsed
	r := s.result("ssf-poll", 1)
	r.Requests = len(seen)
	r.RPS = float64(len(seen)) / elapsed.Seconds()
	left, err := b.pendingSETs(ctx, holder.ID, streamID)
	if err != nil {
		return r, err
	}
	if len(seen) < pending || left > 0 {
		r.Errors = max(pending-len(seen), left)
		r.FirstError = fmt.Sprintf("%d SETs polled of %d pending; %d left unacknowledged", len(seen), pending, left)
	}
	b.note("ssf-poll: %d SETs polled and acknowledged in %.2f s by %d polls of up to 1000, %.0f SETs/s (target ≥ 1000 %s); %d returned twice, %d left",
		len(seen), elapsed.Seconds(), len(s.Latencies), r.RPS, check(r.Errors == 0 && r.RPS >= 1000), duplicates, left)
	return r, nil
}
