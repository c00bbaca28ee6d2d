package ssf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/netguard"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/ssf/internal/store"
)

// Push delivery (RFC 8935). Every SET put on an enabled push stream inserts
// a job naming the stream, in the SET's transaction; a job leases the
// stream's delivery and pushes its pending SETs one at a time, oldest
// first, so a stream's SETs (a consent's among them) arrive in order, and a
// receiver that hangs holds one worker for one timeout and delays no other
// stream. A job that finds the lease held waits a moment and looks again.

const pushQueue = "ssf_push"

// pushBatch bounds the SETs one job pushes before it hands on to a new job.
const pushBatch = 500

type pushArgs struct {
	OrganizationID string `json:"organization_id"`
	StreamID       string `json:"stream_id"`
}

func (pushArgs) Kind() string { return "flowd.ssf_push" }

type pushWorker struct {
	river.WorkerDefaults[pushArgs]
	m *Module
}

func (m *Module) newPusher() error {
	m.client = m.opts.httpClient()
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &pushWorker{m: m}); err != nil {
		return fmt.Errorf("ssf: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &resumeWorker{m: m}); err != nil {
		return fmt.Errorf("ssf: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(m.pool), &river.Config{
		Schema:            database.SSFRiverSchema,
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{pushQueue: {MaxWorkers: m.opts.Workers}},
		FetchPollInterval: m.opts.FetchPollInterval,
		FetchCooldown:     fetchCooldown(m.opts.FetchPollInterval),
		Workers:           workers,
		MaxAttempts:       len(m.opts.Schedule) + 1,
		RetryPolicy:       schedule(m.opts.Schedule),
		JobTimeout:        m.opts.Timeout*pushBatch + time.Minute,
		PeriodicJobs:      []*river.PeriodicJob{resumeJob(m.opts.ResumeEvery)},
	})
	if err != nil {
		return fmt.Errorf("ssf: %w", err)
	}
	m.river = client
	return nil
}

// fetchCooldown keeps River's cooldown (100 ms) no longer than the poll
// interval, which River requires.
func fetchCooldown(poll time.Duration) time.Duration {
	if poll <= 0 {
		return 0
	}
	return min(poll, 100*time.Millisecond)
}

func (o Options) httpClient() *http.Client {
	// No proxy from the environment: it would hide the destination from
	// the connect-time guard.
	dialer := netguard.NewDialer(o.Timeout, o.AllowPrivate)
	var transport http.RoundTripper = &http.Transport{Proxy: nil, DialContext: dialer.DialContext, ForceAttemptHTTP2: true,
		TLSHandshakeTimeout: o.Timeout, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10}
	if o.Wrap != nil {
		transport = o.Wrap(transport)
	}
	return &http.Client{Timeout: o.Timeout, Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Run runs the push workers until ctx ends, and returns once they have.
func (m *Module) Run(ctx context.Context) error {
	if err := database.RetryWhileUnavailable(ctx, m.log, "ssf: starting the push workers", time.Second, m.river.Start); err != nil {
		if ctx.Err() != nil {
			return nil //nolint:nilerr // told to stop before the workers started: nothing failed
		}
		return fmt.Errorf("ssf: %w", err)
	}
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.Timeout+5*time.Second)
	defer cancel()
	if err := m.river.Stop(stop); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("ssf: %w", err)
	}
	return nil
}

// startPushTx inserts a push job for each of streams in tx.
func (m *Module) startPushTx(ctx context.Context, tx database.Tx, streams []store.Stream) error {
	params := make([]river.InsertManyParams, len(streams))
	for i, s := range streams {
		params[i] = river.InsertManyParams{Args: pushArgs{OrganizationID: s.OrganizationID, StreamID: s.ID},
			InsertOpts: &river.InsertOpts{Queue: pushQueue}}
	}
	_, err := m.river.InsertManyTx(ctx, tx, params)
	return err
}

// Work pushes a stream's pending SETs.
func (w *pushWorker) Work(ctx context.Context, job *river.Job[pushArgs]) error {
	m, a := w.m, job.Args
	lease := m.opts.Timeout + 5*time.Second
	s, ok, err := store.Lease(ctx, m.pool, a.OrganizationID, a.StreamID, lease)
	if err != nil {
		return err
	}
	if !ok {
		held, err := store.Leased(ctx, m.pool, a.OrganizationID, a.StreamID)
		if err != nil {
			return err
		}
		if held {
			// Another job pushes the stream now; this one looks again
			// shortly, in case that one has just passed its last SET.
			return river.JobSnooze(time.Second)
		}
		return nil // paused, disabled, polled or gone: nothing to push
	}
	defer func() {
		if err := store.Release(context.WithoutCancel(ctx), m.pool, a.OrganizationID, a.StreamID); err != nil {
			m.log.WarnContext(ctx, "ssf: releasing a stream's delivery", "stream_id", a.StreamID, "error", err)
		}
	}()
	for pushed := 0; pushed < pushBatch; {
		pending, err := store.Pending(ctx, m.pool, a.OrganizationID, a.StreamID, 50)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		for _, set := range pending {
			if err := m.pushOne(ctx, s, set, job); errors.Is(err, errPaused) {
				return nil // enabling the stream again starts a new job
			} else if err != nil {
				return err
			}
			pushed++
			if err := store.Renew(ctx, m.pool, a.OrganizationID, a.StreamID, lease); err != nil {
				return err
			}
		}
	}
	// A long backlog goes on in a job of its own.
	_, err = m.river.Insert(ctx, a, &river.InsertOpts{Queue: pushQueue})
	return err
}

// errorBody is RFC 8935 §2.3's error response.
type errorBody struct {
	Err         string `json:"err"`
	Description string `json:"description"`
}

// pushOne posts one SET and records the outcome: 202 acknowledges it, a
// 400 with an error body rejects it for good (the receiver will never take
// it), anything else is a failure that River retries and that, repeated,
// pauses the stream.
func (m *Module) pushOne(ctx context.Context, s store.Stream, set store.SET, job *river.Job[pushArgs]) error {
	status, body, sendErr := m.send(ctx, s, set.JWS)
	var st *int
	if status != 0 {
		st = &status
	}
	switch {
	case sendErr == nil && status >= 200 && status < 300:
		if _, err := store.Settle(ctx, m.pool, s.OrganizationID, s.ID, []string{set.JTI}, st, "", ""); err != nil {
			return err
		}
		_, err := store.RecordOutcome(ctx, m.pool, s.OrganizationID, s.ID, false, "")
		return err
	case sendErr == nil && status == http.StatusBadRequest && body.Err != "":
		_, err := store.Settle(ctx, m.pool, s.OrganizationID, s.ID, []string{set.JTI}, st, body.Err, body.Description)
		return err
	}
	msg := fmt.Sprintf("HTTP %d", status)
	if sendErr != nil {
		msg = sendErr.Error()
	} else if body.Err != "" {
		msg += ": " + body.Err + " " + body.Description
	}
	msg = truncate(msg, 500)
	if err := store.FailAttempt(ctx, m.pool, s.OrganizationID, s.ID, set.JTI, st, msg); err != nil {
		return err
	}
	failures, err := store.RecordOutcome(ctx, m.pool, s.OrganizationID, s.ID, true, msg)
	if err != nil {
		return err
	}
	if failures >= m.opts.PauseAfter || job.Attempt >= len(m.opts.Schedule)+1 {
		if err := m.pauseFailing(ctx, s, failures, msg); err != nil {
			return err
		}
		return errPaused
	}
	return fmt.Errorf("ssf: push to stream %s: %s", s.ID, msg)
}

// send posts jws to the stream's endpoint and reads an error body, if any.
func (m *Module) send(ctx context.Context, s store.Stream, jws string) (int, errorBody, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.EndpointURL, strings.NewReader(jws))
	if err != nil {
		return 0, errorBody{}, err
	}
	req.Header.Set("Content-Type", "application/secevent+jwt")
	req.Header.Set("Accept", "application/json")
	auth, err := m.authorization(s)
	if err != nil {
		return 0, errorBody{}, fmt.Errorf("the stream's Authorization header does not open: %w", err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := m.client.Do(req)
	if err != nil {
		var blocked *netguard.BlockedError
		if errors.As(err, &blocked) {
			return 0, errorBody{}, errors.New("the endpoint's address is not public")
		}
		return 0, errorBody{}, errors.New(truncate(err.Error(), 300))
	}
	defer res.Body.Close()
	var body errorBody
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 16<<10))
	if res.StatusCode >= 400 {
		_ = json.Unmarshal(raw, &body)
		body.Err, body.Description = truncate(body.Err, 100), truncate(body.Description, 300)
	}
	return res.StatusCode, body, nil
}

// errPaused says pushOne paused the stream: its job ends without error.
var errPaused = errors.New("ssf: the stream is paused")

// pauseFailing pauses a stream whose pushes keep failing and puts a
// stream-updated event on it, sent after what it held once enabled.
func (m *Module) pauseFailing(ctx context.Context, s store.Stream, failures int, msg string) error {
	reason := truncate(fmt.Sprintf("flowd paused the stream after %d failed pushes in a row; the last: %s", failures, msg), MaxReason)
	return database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		r, err := store.GetStream(ctx, tx, s.OrganizationID, s.ID, true)
		if err != nil || Status(r.Status) != Enabled {
			return nil //nolint:nilerr // deleted or changed meanwhile: the receiver decided
		}
		r.Status, r.StatusReason = string(Paused), reason
		if err := store.SaveStream(ctx, tx, r); err != nil {
			return err
		}
		m.log.WarnContext(ctx, "ssf: a failing stream is paused", "organization_id", s.OrganizationID, "stream_id", s.ID, "failures", failures)
		if m.opts.Audit != nil {
			if err := m.opts.Audit.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: s.OrganizationID, Actor: "system",
				Action: identity.AuditStreamStatus, Target: s.ID, Detail: "paused: " + truncate(reason, 450)}); err != nil {
				return err
			}
		}
		return m.streamEventTx(ctx, tx, r, EventStreamUpdated, map[string]any{"status": string(Paused), "reason": reason})
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// schedule is River's retry policy for pushes: the n-th failure waits
// schedule[n-1] plus up to 20 % jitter.
type schedule []time.Duration

// NextRetry implements river.ClientRetryPolicy.
func (p schedule) NextRetry(job *rivertype.JobRow) time.Time {
	d := p[min(max(len(job.Errors)+1, 1), len(p))-1]
	return time.Now().Add(d + time.Duration(rand.Int64N(int64(d)/5+1)))
}
