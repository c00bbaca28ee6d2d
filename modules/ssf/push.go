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

const pushQueue = "ssf_push"

// pushPerJob bounds the SETs one job pushes before it hands on to a new job.
const pushPerJob = 500

type pushArgs struct {
	OrganizationID string `json:"organization_id"`
	StreamID       string `json:"stream_id"`
	// Resume marks a job the resume job started: it waits for a lease
	// that a dead instance's job still holds.
	Resume bool `json:"resume,omitempty"`
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
	client, err := river.NewClient(riverpgxv5.New(m.workers), &river.Config{
		Schema:            database.SSFRiverSchema,
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{pushQueue: {MaxWorkers: m.opts.Workers}},
		FetchPollInterval: m.opts.FetchPollInterval,
		FetchCooldown:     fetchCooldown(m.opts.FetchPollInterval),
		Workers:           workers,
		MaxAttempts:       len(m.opts.Schedule) + 1,
		RetryPolicy:       schedule(m.opts.Schedule),
		JobTimeout:        m.opts.Timeout*pushPerJob + time.Minute,
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
		TLSHandshakeTimeout: o.Timeout, MaxIdleConnsPerHost: max(4, o.InFlight), IdleConnTimeout: 90 * time.Second,
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

// errorBody is RFC 8935 §2.3's error response.
type errorBody struct {
	Err         string `json:"err"`
	Description string `json:"description"`
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

// pauseFailing pauses a stream whose pushes keep failing and puts a
// stream-updated event on it, sent after what it held once enabled.
func (m *Module) pauseFailing(ctx context.Context, s store.Stream, failures int, msg string) error {
	reason := truncate(fmt.Sprintf("flowd paused the stream after %d failed pushes in a row; the last: %s", failures, msg), MaxReason)
	return database.WithTx(ctx, m.workers, func(tx database.Tx) error {
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

// schedule is the waits after the first, second, … failure: a stream's
// failed pushes in a row, and a push job's errors (River's retry policy).
type schedule []time.Duration

// after is the wait after the n-th failure: its step plus up to 20 %.
func (p schedule) after(n int) time.Duration {
	d := p[min(max(n, 1), len(p))-1]
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// NextRetry implements river.ClientRetryPolicy.
func (p schedule) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(p.after(len(job.Errors) + 1))
}
