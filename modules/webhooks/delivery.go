package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/netguard"
	"github.com/flowd/flowd/modules/webhooks/internal/hostgate"
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

// deliveryWorker is River's worker of delivery jobs.
type deliveryWorker struct {
	river.WorkerDefaults[deliveryArgs]
	m *Module
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
func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	m := w.m
	ev, stored, err := m.delivery(ctx, job.Args)
	if errors.Is(err, store.ErrNotFound) {
		if wait := awaitRow(job.JobRow, time.Now()); wait != nil {
			return wait
		}
		return river.JobCancel(fmt.Errorf("event %s no longer exists", job.Args.EventID))
	}
	if err != nil {
		return err
	}
	if ev.JobID != job.ID {
		// The delivery has a newer job than this one: a recovery's, or a
		// redelivery's while this one ran. A delivery failed when its
		// endpoint was disabled keeps its job, which runs once more: the
		// newer job sends it, and this one must not, least of all use up
		// its last attempt and fail it for good.
		return river.JobCancel(fmt.Errorf("delivery %s has a newer job", ev.ID))
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

	secrets, err := m.signingSecrets(ctx, ev.OrganizationID, stored)
	if err != nil {
		return err
	}
	host := hostOf(ev.URL)
	var (
		status  int
		failure string
		abort   bool
	)
	// A delivery its host cannot take now waits, but no longer than its
	// retries would have lasted.
	a := m.gate.Enter(ctx, host)
	start := time.Now()
	tooOld := !a.OK && time.Since(job.CreatedAt) > m.holdLimit
	switch {
	case a.OK:
		status, failure, abort = m.send(ctx, ev, secrets)
		m.gate.Leave(a.Ticket, m.verdictOf(ctx, status, time.Since(start)))
	case ctx.Err() != nil:
		return ctx.Err()
	case !tooOld:
		return w.hold(ctx, job, a)
	default:
		failure = fmt.Sprintf("not sent: the host was busy or did not answer within %s for as long as the retries last", m.timeout)
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
	m.metrics.observe(ctx, out, latency)

	state := map[outcome]string{delivered: store.Delivered, failing: store.Pending, gone: store.Failed, exhausted: store.Failed}[out]
	message := ""
	if out != delivered {
		message = fmt.Sprintf("Webhook delivery to %s failed: %s", host, failure)
	}
	dbctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rec, err := store.RecordAttempt(dbctx, m.pool, store.Attempt{
		OrganizationID: ev.OrganizationID, EventID: ev.ID, At: start, StatusCode: status, Error: failure, Latency: latency,
	}, state, message, time.Now())
	if err != nil {
		return fmt.Errorf("record attempt: %w", err)
	}
	m.disableFailing(dbctx, ev.OrganizationID, rec, failure)
	log := m.log.With("event_id", ev.ID, "event_type", ev.Type, "flow_id", ev.FlowID, "host", host,
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
		if job.Attempt >= m.incidentAfter && ev.TaskID != "" {
			if err := m.reporter.TaskFailing(dbctx, ev.OrganizationID, ev.TaskID, message); err != nil {
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
// organization: its delivery's is looked up first. store.ErrNotFound.
func (m *Module) delivery(ctx context.Context, args deliveryArgs) (store.Event, *store.Secrets, error) {
	org := args.OrganizationID
	if org == "" {
		var err error
		if org, err = store.DeliveryOrganization(ctx, m.pool, args.EventID); err != nil {
			return store.Event{}, nil, err
		}
	}
	return store.GetEventAndSecrets(ctx, m.pool, org, args.EventID)
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

// awaitRow is the snooze (not an attempt) of a job whose row it cannot read
// while the row may still become visible, and nil once it cannot.
func awaitRow(job *rivertype.JobRow, now time.Time) error {
	if now.Sub(job.CreatedAt) < rowVisibleWithin {
		return river.JobSnooze(notVisibleRetry)
	}
	return nil
}

// hold snoozes a delivery that its host cannot take now: River does not
// count a snooze as an attempt. One held by a slow host goes behind fresh
// deliveries, as such holds pile up; one held by a busy host keeps its place.
func (w *deliveryWorker) hold(ctx context.Context, job *river.Job[deliveryArgs], a hostgate.Admission) error {
	w.m.metrics.held.Inc()
	if a.Slow {
		w.demote(ctx, job)
	}
	return river.JobSnooze(a.Hold)
}

// demote moves a job behind first attempts: River fetches a retry or a held
// delivery with its job's priority, and it is not fresh any more.
func (w *deliveryWorker) demote(ctx context.Context, job *river.Job[deliveryArgs]) {
	if job.Priority >= retryPriority {
		return
	}
	if err := store.SetJobPriority(ctx, w.m.pool, job.ID, retryPriority); err != nil {
		w.m.log.ErrorContext(ctx, "webhook: demoting a delivery behind fresh ones", "job_id", job.ID, "error", err.Error())
	}
}

// verdictOf says what an attempt that got status after latency learned of
// its host: with no answer within the whole timeout, it timed out.
func (m *Module) verdictOf(ctx context.Context, status int, latency time.Duration) hostgate.Verdict {
	switch {
	case ctx.Err() != nil:
		return hostgate.Interrupted
	case status == 0 && latency >= m.timeout:
		return hostgate.TimedOut
	}
	return hostgate.Answered
}

// report tells the reporter of a final outcome. When that fails the job is
// snoozed (not counted as an attempt) and the next run reports again without
// sending, since the event is no longer pending.
func (w *deliveryWorker) report(ctx context.Context, ev store.Event, out outcome, message string) error {
	if ev.TaskID != "" {
		var err error
		if out == delivered {
			err = w.m.reporter.TaskSucceeded(ctx, ev.OrganizationID, ev.TaskID)
		} else {
			err = w.m.reporter.TaskFailed(ctx, ev.OrganizationID, ev.TaskID, message)
		}
		if err != nil {
			w.m.log.ErrorContext(ctx, "webhook: reporting the task's outcome; will report again", "event_id", ev.ID, "error", err.Error())
			return river.JobSnooze(30 * time.Second)
		}
	}
	if out == delivered {
		return nil
	}
	return river.JobCancel(errors.New(message))
}

// Timeout bounds one job: the attempt plus its bookkeeping.
func (w *deliveryWorker) Timeout(*river.Job[deliveryArgs]) time.Duration {
	return w.m.timeout + 5*time.Second
}

// signingSecrets returns the organization's secrets that sign now, current
// first. An organization without one (made before webhooks existed) gets one.
// The delivery read them with its event (stored, nil when there were none).
func (m *Module) signingSecrets(ctx context.Context, organizationID string, stored *store.Secrets) ([]string, error) {
	var s store.Secrets
	var err error
	if stored != nil {
		s = *stored
	} else {
		s, err = store.InsertSecret(ctx, m.pool, organizationID, m.sealer.seal(organizationID, newSecret()))
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
		if secrets[i], err = m.sealer.open(organizationID, v); err != nil {
			return nil, err
		}
	}
	return secrets, nil
}

// send POSTs the event once. It returns the response's status (0 when none
// came); when no response came, a description of the failure that names
// neither the URL's path nor its query; and whether the receiver answered
// with the header webhook-delivery: abort, which ends this event's retries.
func (m *Module) send(ctx context.Context, ev store.Event, secrets []string) (status int, failure string, abort bool) {
	ts := time.Now().Unix()
	// webhook-id is the event's: the same on every retry, and on the
	// event's deliveries to other destinations.
	sig, err := Sign(secrets, ev.EventID, ts, []byte(ev.Body))
	if err != nil {
		return 0, err.Error(), false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ev.URL, bytes.NewReader([]byte(ev.Body)))
	if err != nil {
		return 0, "invalid webhook URL", false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "flowd-webhooks/1")
	req.Header.Set("webhook-id", ev.EventID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, describe(err, m.timeout), false
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

// hostOf returns the host (and port) of a webhook URL, the one part of it an
// incident message or a log line names.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return u.Host
}
