// Package delivery is the webhooks' delivery worker: River's jobs that
// each make one signed attempt at sending an event to its URL, hold it back
// while its host cannot take it, record the attempt and tell the flow's
// task how it went.
package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/netguard"
	"github.com/flowd/flowd/modules/webhooks/internal/hostgate"
	"github.com/flowd/flowd/modules/webhooks/internal/signing"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// newHTTPClient returns the client deliveries use: one timeout for the whole
// attempt, no redirects, no proxy from the environment (a proxy would hide
// the real destination from the SSRF guard), and the guard on every connect;
// wrap, when set, wraps the transport.
func newHTTPClient(timeout time.Duration, allowPrivate bool, wrap func(http.RoundTripper) http.RoundTripper) *http.Client {
	dialer := netguard.NewDialer(timeout, allowPrivate)
	var transport http.RoundTripper = &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    timeout,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	if wrap != nil {
		transport = wrap(transport)
	}
	return &http.Client{
		Timeout:       timeout,
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Worker is River's worker of delivery jobs.
type Worker struct {
	river.WorkerDefaults[Args]
	pool          *pgxpool.Pool
	reporter      Reporter
	log           *slog.Logger
	client        *http.Client
	timeout       time.Duration
	incidentAfter int
	metrics       *metrics
	sealer        *signing.Sealer
	gate          *hostgate.Gate
	holdLimit     time.Duration
	recorded      func(ctx context.Context, organizationID string, rec store.Recorded, failure string)
}

// Config is what a Worker works with.
type Config struct {
	Pool *pgxpool.Pool
	// Reporter is told how each flow's send-initiate-webhook task goes.
	Reporter Reporter
	Log      *slog.Logger
	// Timeout bounds each attempt; AllowPrivate turns the SSRF guard off;
	// Transport, when set, wraps the deliveries' transport.
	Timeout      time.Duration
	AllowPrivate bool
	Transport    func(http.RoundTripper) http.RoundTripper
	// IncidentAfter is the failed attempt from which the reporter hears of
	// a failing task.
	IncidentAfter int
	// Registry, when set, receives the delivery metrics.
	Registry prometheus.Registerer
	// Sealer opens the organizations' signing secrets.
	Sealer *signing.Sealer
	// Gate holds back deliveries their host cannot take now, for up to
	// HoldLimit after their job was made.
	Gate      *hostgate.Gate
	HoldLimit time.Duration
	// Recorded is told of every recorded attempt: it disables an endpoint
	// whose deliveries have failed too long.
	Recorded func(ctx context.Context, organizationID string, rec store.Recorded, failure string)
}

// NewWorker returns the delivery worker of c.
func NewWorker(c Config) *Worker {
	return &Worker{pool: c.Pool, reporter: c.Reporter, log: c.Log, client: newHTTPClient(c.Timeout, c.AllowPrivate, c.Transport),
		timeout: c.Timeout, incidentAfter: c.IncidentAfter, metrics: newMetrics(c.Registry), sealer: c.Sealer, gate: c.Gate,
		holdLimit: c.HoldLimit, recorded: c.Recorded}
}

// Reporter is told how each flow's send-initiate-webhook task goes.
type Reporter interface {
	TaskSucceeded(ctx context.Context, organizationID, taskID string) error
	TaskFailing(ctx context.Context, organizationID, taskID, message string) error
	TaskFailed(ctx context.Context, organizationID, taskID, message string) error
}

// outcome is how one attempt went.
type outcome int

const (
	delivered outcome = iota // 2xx
	failing                  // will be retried
	gone                     // 410: never again
	exhausted                // the last attempt failed
)

// Work makes one attempt at delivering the job's event, records it, and tells
// the task reporter. It is safe to run again for the same event at any point
// (after a crash, twice at once): the receiver may see a duplicate, with the
// same webhook-id, and the event's state only moves on from pending.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	ev, stored, err := w.delivery(ctx, job.Args)
	if errors.Is(err, database.ErrNotFound) {
		if wait := AwaitRow(job.JobRow, time.Now()); wait != nil {
			return wait
		}
		return river.JobCancel(fmt.Errorf("event %s no longer exists", job.Args.EventID))
	}
	if err != nil {
		return err
	}
	if ev.JobID < job.ID {
		// The delivery still names an older job: the change that made this
		// one (a recovery, a redelivery) is not visible yet (AwaitRow).
		if wait := AwaitRow(job.JobRow, time.Now()); wait != nil {
			return wait
		}
	}
	if ev.JobID != job.ID {
		// The delivery has a newer job than this one: a recovery's, or a
		// redelivery's while this one ran. A delivery failed when its
		// endpoint was disabled keeps its job, which runs once more: the
		// newer job sends it, and this one must not, least of all use up
		// its last attempt and fail it for good.
		return river.JobCancel(fmt.Errorf("delivery %s has job %d, not this one", ev.ID, ev.JobID))
	}
	switch ev.State {
	case store.Cancelled:
		return river.JobCancel(errors.New("event cancelled: its flow was deleted"))
	case store.Delivered:
		// Delivered, but the reporter was not yet told (it failed last time).
		return w.report(ctx, ev, delivered, "")
	case store.Failed:
		return w.report(ctx, ev, gone, ev.LastError)
	}

	policy := ev.Policy
	if policy.InOrder() && policy.PendingBefore {
		held, err := w.holdInOrder(ctx, ev, policy)
		if err != nil {
			return err
		}
		if held {
			w.metrics.inOrder.Inc()
			return river.JobSnooze(HeldRecheck)
		}
	}
	if policy.RateLimit > 0 {
		if wait := w.throttle(ctx, job, ev, policy); wait != nil {
			return wait
		}
	}

	secrets, err := w.signingSecrets(ctx, ev.OrganizationID, stored)
	if err != nil {
		return err
	}
	host := HostOf(ev.URL)
	var (
		status  int
		failure string
		abort   bool
	)
	// A delivery its host cannot take now waits, but no longer than its
	// retries would have lasted.
	a := w.gate.Enter(ctx, host)
	start := time.Now()
	tooOld := !a.OK && time.Since(job.CreatedAt) > w.holdLimit
	switch {
	case a.OK:
		status, failure, abort = w.send(ctx, ev, secrets)
		w.gate.Leave(a.Ticket, w.verdictOf(ctx, status, time.Since(start)))
	case ctx.Err() != nil:
		return ctx.Err()
	case !tooOld:
		return w.hold(ctx, job, a)
	default:
		failure = fmt.Sprintf("not sent: the host was busy or did not answer within %s for as long as the retries last", w.timeout)
	}
	latency := time.Since(start)
	if ctx.Err() != nil {
		// Cancelled (the flow was deleted) or stopping: not the receiver's
		// doing, so neither an attempt to show nor a failure to count.
		return ctx.Err()
	}

	out := delivered
	switch {
	case failure == "" && status >= 200 && status < 300:
	case status == http.StatusGone:
		out, failure = gone, "HTTP 410 Gone: the receiver asked for no more deliveries"
	case abort:
		out, failure = gone, fmt.Sprintf("HTTP %d %s with webhook-delivery: abort: the receiver asked for no more attempts of this event",
			status, http.StatusText(status))
	case tooOld, job.Attempt >= job.MaxAttempts:
		out = exhausted
	default:
		out = failing
	}
	if failure == "" && out != delivered {
		failure = fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	}
	w.metrics.observe(ctx, out, latency)

	state := map[outcome]string{delivered: store.Delivered, failing: store.Pending, gone: store.Failed, exhausted: store.Failed}[out]
	message := ""
	if out != delivered {
		message = fmt.Sprintf("Webhook delivery to %s failed: %s", host, failure)
	}
	dbctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	attempt := store.Attempt{OrganizationID: ev.OrganizationID, EventID: ev.ID, At: start, StatusCode: status, Error: failure, Latency: latency}
	var rec store.Recorded
	if policy.InOrder() {
		rec, err = w.recordInOrder(dbctx, attempt, state, message, policy)
	} else {
		rec, err = store.RecordAttempt(dbctx, w.pool, attempt, state, message, time.Now())
	}
	if err != nil {
		return fmt.Errorf("record attempt: %w", err)
	}
	w.recorded(dbctx, ev.OrganizationID, rec, failure)
	log := w.log.With("event_id", ev.ID, "event_type", ev.Type, "flow_id", ev.FlowID, "host", host,
		"attempt", job.Attempt, "status", status, "latency_ms", latency.Milliseconds())
	if rec.State == store.Cancelled {
		log.InfoContext(ctx, "webhook event cancelled during delivery")
		return river.JobCancel(errors.New("event cancelled: its flow was deleted"))
	}
	if out == delivered {
		log.DebugContext(ctx, "webhook delivered")
		return w.report(dbctx, ev, delivered, "")
	}
	log.WarnContext(ctx, "webhook delivery failed", "error", failure, "final", out != failing)
	if out == failing {
		if job.Attempt >= w.incidentAfter && ev.TaskID != "" {
			if err := w.reporter.TaskFailing(dbctx, ev.OrganizationID, ev.TaskID, message); err != nil {
				log.ErrorContext(ctx, "webhook: reporting the failing task", "error", err.Error())
			}
		}
		w.demote(dbctx, job)
		// The error makes River retry on the schedule; its text is kept in
		// River's job row and logs, so it names the host, not the URL.
		return errors.New(message)
	}
	return w.report(dbctx, ev, gone, message)
}

// delivery reads a job's delivery and its organization's signing secrets.
// A job queued by an instance older than migration 022 names no
// organization: its delivery's is looked up first. database.ErrNotFound.
func (w *Worker) delivery(ctx context.Context, args Args) (store.Event, *store.Secrets, error) {
	org := args.OrganizationID
	if org == "" {
		var err error
		if org, err = store.DeliveryOrganization(ctx, w.pool, args.EventID); err != nil {
			return store.Event{}, nil, err
		}
	}
	return store.GetEventAndSecrets(ctx, w.pool, org, args.EventID)
}

// rowVisibleWithin is how long a job waits for the row it was queued with
// (a delivery's event, a recovery) to become visible. On Citus the job is
// on the coordinator and the row on a worker node, and their distributed
// commit makes the coordinator's part visible first: a worker that picks
// the job up at once may not see the row yet. Once that long has passed, a
// missing row was deleted.
const rowVisibleWithin = time.Minute

// notVisibleRetry is how soon a job whose row is not visible yet looks again.
const notVisibleRetry = time.Second

// AwaitRow is the snooze (not an attempt) of a job whose row it cannot read
// while the row may still become visible, and nil once it cannot.
func AwaitRow(job *rivertype.JobRow, now time.Time) error {
	if now.Sub(job.CreatedAt) < rowVisibleWithin {
		return river.JobSnooze(notVisibleRetry)
	}
	return nil
}

// hold snoozes a delivery that its host cannot take now: River does not
// count a snooze as an attempt. One held by a slow host goes behind fresh
// deliveries, as such holds pile up; one held by a busy host keeps its place.
func (w *Worker) hold(ctx context.Context, job *river.Job[Args], a hostgate.Admission) error {
	w.metrics.held.Inc()
	if a.Slow {
		w.demote(ctx, job)
	}
	return river.JobSnooze(a.Hold)
}

// demote moves a job behind first attempts: River fetches a retry or a held
// delivery with its job's priority, and it is not fresh any more.
func (w *Worker) demote(ctx context.Context, job *river.Job[Args]) {
	if job.Priority >= RetryPriority {
		return
	}
	if err := store.SetJobPriority(ctx, w.pool, job.ID, RetryPriority); err != nil {
		w.log.ErrorContext(ctx, "webhook: demoting a delivery behind fresh ones", "job_id", job.ID, "error", err.Error())
	}
}

// verdictOf says what an attempt that got status after latency learned of
// its host: with no answer within the whole timeout, it timed out.
func (w *Worker) verdictOf(ctx context.Context, status int, latency time.Duration) hostgate.Verdict {
	switch {
	case ctx.Err() != nil:
		return hostgate.Interrupted
	case status == 0 && latency >= w.timeout:
		return hostgate.TimedOut
	}
	return hostgate.Answered
}

// report tells the reporter of a final outcome. When that fails the job is
// snoozed (not counted as an attempt) and the next run reports again without
// sending, since the event is no longer pending.
func (w *Worker) report(ctx context.Context, ev store.Event, out outcome, message string) error {
	if ev.TaskID != "" {
		var err error
		if out == delivered {
			err = w.reporter.TaskSucceeded(ctx, ev.OrganizationID, ev.TaskID)
		} else {
			err = w.reporter.TaskFailed(ctx, ev.OrganizationID, ev.TaskID, message)
		}
		if err != nil {
			w.log.ErrorContext(ctx, "webhook: reporting the task's outcome; will report again", "event_id", ev.ID, "error", err.Error())
			return river.JobSnooze(30 * time.Second)
		}
	}
	if out == delivered {
		return nil
	}
	return river.JobCancel(errors.New(message))
}

// Timeout bounds one job: the attempt plus its bookkeeping.
func (w *Worker) Timeout(*river.Job[Args]) time.Duration {
	return w.timeout + 5*time.Second
}

// signingSecrets returns the organization's secrets that sign now, current
// first. An organization without one (made before webhooks existed) gets one.
// The delivery read them with its event (stored, nil when there were none).
func (w *Worker) signingSecrets(ctx context.Context, organizationID string, stored *store.Secrets) ([]string, error) {
	var s store.Secrets
	var err error
	if stored != nil {
		s = *stored
	} else {
		s, err = store.InsertSecret(ctx, w.pool, organizationID, w.sealer.Seal(organizationID, signing.NewSecret()))
		if err != nil {
			return nil, fmt.Errorf("signing secret: %w", database.Classify(err))
		}
	}
	sealed := []string{s.Current}
	if s.Previous != "" {
		sealed = append(sealed, s.Previous)
	}
	secrets := make([]string, len(sealed))
	for i, v := range sealed {
		if secrets[i], err = w.sealer.Open(organizationID, v); err != nil {
			return nil, err
		}
	}
	return secrets, nil
}

// send POSTs the event once. It returns the response's status (0 when none
// came); when no response came, a description of the failure that names
// neither the URL's path nor its query; and whether the receiver answered
// with the header webhook-delivery: abort, which ends this event's retries.
func (w *Worker) send(ctx context.Context, ev store.Event, secrets []string) (status int, failure string, abort bool) {
	ts := time.Now().Unix()
	body, err := bodyOf(ev)
	if err != nil {
		return 0, err.Error(), false
	}
	// webhook-id is the event's: the same on every retry, and on the
	// event's deliveries to other destinations.
	sig, err := w.signature(ctx, ev, secrets, ts, body)
	if err != nil {
		return 0, err.Error(), false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ev.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "invalid webhook URL", false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "flowd-webhooks/1")
	req.Header.Set("webhook-id", ev.EventID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, describe(err, w.timeout), false
	}
	// Read a little of the body so the connection can be reused; what the
	// receiver says is not kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	abort = (resp.StatusCode < 200 || resp.StatusCode >= 300) && strings.EqualFold(resp.Header.Get("webhook-delivery"), "abort")
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return resp.StatusCode, fmt.Sprintf("HTTP %d %s (redirects are not followed)", resp.StatusCode, http.StatusText(resp.StatusCode)), abort
	}
	return resp.StatusCode, "", abort
}

// describe turns a transport error into a short message for staff. url.Error
// would repeat the whole URL, query included, so it is unwrapped first.
func describe(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var blocked *netguard.BlockedError
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.As(err, &blocked):
		return blocked.Error()
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return fmt.Sprintf("no response within %s", timeout)
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "host not found (DNS)"
		}
		return "DNS lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the receiver"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &certErr):
		return "TLS certificate not trusted: " + certErr.Err.Error()
	case errors.As(err, &recordErr):
		return "TLS handshake failed (the receiver does not speak https?)"
	}
	return err.Error()
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// HostOf returns the host (and port) of a webhook URL, the one part of it an
// incident message or a log line names.
func HostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return u.Host
}

// Queue is the River queue of webhook deliveries.
const Queue = "webhooks"

// Delivery priorities; River fetches the lowest first. A first attempt goes
// before retries and deliveries held back by their host, so that a backlog
// coming due after an outage does not delay fresh events.
const (
	FirstPriority = 1
	RetryPriority = 2
)

// Args are a River job's arguments: the delivery's organization
// and id; the delivery itself is in webhook_events. Every statement of the
// job names the organization (on Citus, its node). Migration 022 gave the
// jobs queued before it their organization; one inserted since by an older
// instance has none, and its delivery is looked up by its id alone.
type Args struct {
	OrganizationID string `json:"organization_id,omitempty"`
	EventID        string `json:"event_id"`
}

// Kind names the job kind in River's table.
func (Args) Kind() string { return "flowd.webhook_delivery" }
