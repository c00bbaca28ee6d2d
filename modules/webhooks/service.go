package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/jobmetrics"
	"github.com/flowd/flowd/modules/webhooks/internal/cleanup"
	"github.com/flowd/flowd/modules/webhooks/internal/delivery"
	"github.com/flowd/flowd/modules/webhooks/internal/hostgate"
	"github.com/flowd/flowd/modules/webhooks/internal/payload"
	"github.com/flowd/flowd/modules/webhooks/internal/recovery"
	"github.com/flowd/flowd/modules/webhooks/internal/signing"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// DefaultSchedule is the wait before each retry of a failed delivery: the
// schedule Standard Webhooks' reference senders use. With the first attempt
// that makes 8 attempts over 27 h 35 min, more than the 24 h the contract
// asks for; each wait is lengthened by up to 20 % of jitter, never shortened.
var DefaultSchedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// DefaultIncidentAfter is the failed attempt that opens an incident: the
// third, about five minutes after the first with DefaultSchedule, so that a
// receiver's brief blip (a deploy, a restart) does not alarm staff while a
// real outage shows on the flow within minutes.
const DefaultIncidentAfter = 3

// DefaultHostConcurrency is how many deliveries one instance sends to one
// host at once: enough for a receiver that answers in 100 ms to take 200
// deliveries a second from each instance, few enough that a receiver that
// hangs holds a fifth of the workers until its circuit opens.
const DefaultHostConcurrency = 20

// DefaultHoldBackoff is the first wait of a delivery held back by its host.
const DefaultHoldBackoff = time.Second

// Options configure the service. Zero values take the defaults.
type Options struct {
	// Timeout bounds each attempt (FLOWD_WEBHOOK_TIMEOUT, 10 s).
	Timeout time.Duration
	// AllowPrivate turns the SSRF guard off, so that deliveries reach
	// loopback, private and every other non-public address
	// (FLOWD_WEBHOOK_ALLOW_PRIVATE; development and tests only).
	AllowPrivate bool
	// Schedule is the wait before each retry (DefaultSchedule); its length
	// decides how many attempts an event gets. Tests use short waits.
	Schedule []time.Duration
	// IncidentAfter is the failed attempt from which TaskFailing is called
	// (DefaultIncidentAfter).
	IncidentAfter int
	// Workers is how many deliveries one instance makes at once (100). A
	// worker mostly waits for the receiver, so many are cheap, and too few
	// would let deliveries fall behind the creates an instance accepts.
	Workers int
	// PollInterval is how often idle workers look for due retries; new events
	// wake them at once through LISTEN/NOTIFY (River's default, 1 s).
	PollInterval time.Duration
	// FetchCooldown is the shortest time between two fetches of new jobs
	// (DefaultFetchCooldown). River's own default, 100 ms, caps deliveries at
	// Workers per 100 ms and makes each event wait for the next fetch: a
	// short cooldown keeps deliveries close behind the commits that cause
	// them, at the price of one small query per fetch.
	FetchCooldown time.Duration
	// Log receives the module's logs; River's own are kept to warnings.
	Log *slog.Logger
	// Registry, when set, receives the delivery metrics, and reads the
	// backlog of deliveries and the endpoints' health when scraped.
	Registry prometheus.Registerer
	// KeyEncryptionKey (FLOWD_KEY_ENCRYPTION_KEY) encrypts signing secrets at
	// rest; without it they are stored as they are.
	KeyEncryptionKey []byte
	// Retention is how long finished events and their attempts are kept
	// (DefaultRetention); pending ones are kept until they finish.
	Retention time.Duration
	// EventRetention is how long events are kept for the events API
	// (FLOWD_EVENT_RETENTION, DefaultEventRetention).
	EventRetention time.Duration
	// DisableAfter is how long an endpoint's deliveries may fail without a
	// success before flowd disables it (FLOWD_WEBHOOK_DISABLE_AFTER,
	// DefaultDisableAfter).
	DisableAfter time.Duration
	// DrainTimeout is how long Run lets in-flight deliveries finish once its
	// context ends before it cancels them (Timeout plus 5 s: a whole attempt
	// and its bookkeeping).
	DrainTimeout time.Duration
	// RecoveryBatch is how many failed deliveries a recovery sends again per
	// transaction (DefaultRecoveryBatch). Tests use small batches.
	RecoveryBatch int
	// HostConcurrency is how many deliveries the instance sends to one host
	// at once (FLOWD_WEBHOOK_HOST_CONCURRENCY, DefaultHostConcurrency); the
	// others wait, so that a receiver that hangs holds only these workers.
	HostConcurrency int
	// HoldBackoff is the first wait of a delivery held back by its host
	// (DefaultHoldBackoff); tests shorten it.
	HoldBackoff time.Duration
	// Middleware is River's middleware: what carries a request's id and
	// trace into the deliveries it causes.
	Middleware []rivertype.Middleware
	// Transport, when set, wraps the deliveries' transport (tracing's
	// client spans and traceparent).
	Transport func(http.RoundTripper) http.RoundTripper
}

// DefaultFetchCooldown lets the workers fetch new deliveries every 10 ms
// while events keep coming: at most 100 small queries a second, and an event
// waits 5 ms for its fetch on average instead of 50.
const DefaultFetchCooldown = 10 * time.Millisecond

// DefaultRetention keeps a finished event's attempts for the console for 90
// days, long past the 30 days a consent link lives.
const DefaultRetention = 90 * 24 * time.Hour

// Module is the webhooks service: the Service the rest of flowd calls, and
// the River client whose workers deliver. Run runs the workers; a module that
// never runs (an admin command) still publishes and rotates.
type Module struct {
	pool         *pgxpool.Pool
	river        *river.Client[database.Tx]
	log          *slog.Logger
	recoverer    *recovery.Worker
	reach        Reach
	disableAfter time.Duration
	sealer       *signing.Sealer
	// holdLimit is how long a delivery may be held back by its host: as long
	// as its retries would have taken.
	holdLimit time.Duration
}

var _ Service = (*Module)(nil)

// New builds the module on pool. Its delivery workers tell reporter (the
// flows module) how each flow's send-initiate-webhook task goes. It
// publishes, cancels and keeps secrets at once; Run runs the workers.
func New(pool *pgxpool.Pool, reporter TaskReporter, opts Options) (*Module, error) {
	if pool == nil || reporter == nil {
		return nil, errors.New("webhooks: New needs a pool and a TaskReporter")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if len(opts.Schedule) == 0 {
		opts.Schedule = DefaultSchedule
	}
	if opts.IncidentAfter <= 0 {
		opts.IncidentAfter = DefaultIncidentAfter
	}
	if opts.Workers <= 0 {
		opts.Workers = 100
	}
	if opts.FetchCooldown <= 0 {
		opts.FetchCooldown = DefaultFetchCooldown
	}
	if opts.PollInterval > 0 && opts.PollInterval < opts.FetchCooldown {
		opts.FetchCooldown = opts.PollInterval
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.EventRetention <= 0 {
		opts.EventRetention = DefaultEventRetention
	}
	if opts.RecoveryBatch <= 0 {
		opts.RecoveryBatch = DefaultRecoveryBatch
	}
	if opts.DisableAfter <= 0 {
		opts.DisableAfter = DefaultDisableAfter

	}
	if opts.HostConcurrency <= 0 {
		opts.HostConcurrency = DefaultHostConcurrency
	}
	if opts.HoldBackoff <= 0 {
		opts.HoldBackoff = DefaultHoldBackoff
	}
	// A job may run the attempt plus a little database work; a job running
	// longer than twice that belonged to an instance that died, and River's
	// rescuer makes it available again.
	jobTimeout := opts.Timeout + 5*time.Second
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = jobTimeout
	}
	sealer, err := signing.NewSealer(opts.KeyEncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	m := &Module{
		sealer:       sealer,
		pool:         pool,
		log:          opts.Log,
		reach:        Reach{Events: opts.EventRetention, Deliveries: opts.Retention},
		disableAfter: opts.DisableAfter,
	}
	for _, d := range opts.Schedule {
		m.holdLimit += d
	}
	deliveries := delivery.NewWorker(delivery.Config{Pool: pool, Reporter: reporter, Log: opts.Log,
		Timeout: opts.Timeout, AllowPrivate: opts.AllowPrivate, Transport: opts.Transport, IncidentAfter: opts.IncidentAfter,
		Registry: opts.Registry, Sealer: sealer, Gate: hostgate.New(opts.HostConcurrency, opts.HoldBackoff), HoldLimit: m.holdLimit,
		Recorded: m.disableFailing})
	if opts.Registry != nil {
		if err := opts.Registry.Register(delivery.BacklogCollector(pool, opts.Log)); err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, deliveries); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	if err := river.AddWorkerSafely(workers, cleanup.NewWorker(pool, opts.Retention, opts.EventRetention)); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	m.recoverer = recovery.NewWorker(recovery.Config{Pool: pool, Log: opts.Log, Batch: opts.RecoveryBatch,
		Scope: m.endpointScope, Claim: m.claimTx})
	if err := river.AddWorkerSafely(workers, m.recoverer); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:               slog.New(minLevel{opts.Log.Handler(), slog.LevelWarn}),
		Queues:               map[string]river.QueueConfig{delivery.Queue: {MaxWorkers: opts.Workers}, recovery.Queue: {MaxWorkers: recovery.Workers}},
		FetchPollInterval:    opts.PollInterval,
		FetchCooldown:        opts.FetchCooldown,
		Workers:              workers,
		Middleware:           opts.Middleware,
		Hooks:                []rivertype.Hook{jobmetrics.Hook(opts.Registry)},
		MaxAttempts:          len(opts.Schedule) + 1,
		RetryPolicy:          schedulePolicy(opts.Schedule),
		JobTimeout:           jobTimeout,
		RescueStuckJobsAfter: 2 * jobTimeout,
		// With a soft stop timeout, the end of Run's context stops fetching
		// and lets running deliveries finish, cancelling them only when it
		// passes.
		SoftStopTimeout: opts.DrainTimeout,
		// The leader instance prunes old events hourly.
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) {
				return cleanup.Args{}, &river.InsertOpts{Queue: delivery.Queue, MaxAttempts: 3}
			}, &river.PeriodicJobOpts{ID: "webhooks-cleanup", RunOnStart: true})},
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	m.river = client
	return m, nil
}

// Run runs the delivery workers until ctx ends. Then it fetches no more
// deliveries, lets those in flight finish for up to Options.DrainTimeout and
// cancels the rest (their jobs are retried, by this instance or another), and
// returns once every goroutine of the workers has ended. Several instances on
// one database share the work: each job is locked by the one instance working
// it. Run returns an error only when the workers cannot start.
func (m *Module) Run(ctx context.Context) error {
	if err := database.RetryWhileUnavailable(ctx, m.log, "webhooks: starting the workers", time.Second, m.river.Start); err != nil {
		if ctx.Err() != nil {
			return nil //nolint:nilerr // told to stop before the workers started: nothing failed
		}
		return fmt.Errorf("webhooks: %w", err)
	}
	<-m.river.Stopped()
	return nil
}

// useDataOf is a flow.used event's use as its body carries it; nil for
// another event.
func useDataOf(u *Use) *payload.Use {
	if u == nil {
		return nil
	}
	d := &payload.Use{ID: u.ID, DataCategories: u.DataCategories, UsedAt: payload.Time(u.UsedAt), Resource: u.Resource}
	if d.DataCategories == nil {
		d.DataCategories = []string{}
	}
	return d
}

// PublishTx stores ev and, when it has a URL, its delivery and the delivery's
// job, in tx.
func (m *Module) PublishTx(ctx context.Context, tx database.Tx, ev Event) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = time.Now()
	}
	b, err := json.Marshal(payload.Flow{
		Type:      string(ev.Type),
		Timestamp: payload.Time(ev.OccurredAt),
		Data: payload.FlowData{
			FlowID: ev.FlowID, ReferenceID: ev.ReferenceID, OrganizationID: ev.OrganizationID,
			Status: ev.Status, FlowStatus: ev.FlowStatus, Version: ev.Version, Sequence: ev.Sequence,
			FlowDefinitionID: ev.FlowDefinitionID, Use: useDataOf(ev.Use),
		},
	})
	if err != nil {
		return err
	}
	// The event's id is the webhook-id of its deliveries; time-ordered, it
	// keeps the events' index dense.
	id := uuid.Must(uuid.NewV7()).String()
	stored := store.StoredEvent{ID: id, OrganizationID: ev.OrganizationID, FlowID: ev.FlowID, Sequence: ev.Sequence,
		Type: string(ev.Type), Body: string(b)}
	// The delivery to the flow's own URL has the event's id.
	var own *store.Event
	if ev.URL != "" {
		res, err := m.river.InsertTx(ctx, tx, delivery.Args{OrganizationID: ev.OrganizationID, EventID: id},
			&river.InsertOpts{Queue: delivery.Queue, Priority: delivery.FirstPriority})
		if err != nil {
			return fmt.Errorf("webhooks: enqueue: %w", database.Classify(err))
		}
		own = &store.Event{ID: id, EventID: id, OrganizationID: ev.OrganizationID, FlowID: ev.FlowID, TaskID: ev.TaskID,
			Type: string(ev.Type), URL: ev.URL, Body: string(b), JobID: res.Job.ID}
	}
	targets, err := store.InsertEvent(ctx, tx, stored, own)
	if err != nil {
		return fmt.Errorf("webhooks: store event: %w", database.Classify(err))
	}
	if len(targets) == 0 {
		return nil
	}
	return m.fanOutTx(ctx, tx, stored, targets)
}

// fanOutTx stores a delivery of the event to each endpoint, each with its
// own job, so that a slow or failing endpoint holds up only its own
// deliveries.
func (m *Module) fanOutTx(ctx context.Context, tx database.Tx, ev store.StoredEvent, targets []store.Target) error {
	ids, endpoints, urls := make([]string, len(targets)), make([]string, len(targets)), make([]string, len(targets))
	params := make([]river.InsertManyParams, len(targets))
	for i, t := range targets {
		ids[i], endpoints[i], urls[i] = uuid.Must(uuid.NewV7()).String(), t.EndpointID, t.URL
		params[i] = river.InsertManyParams{Args: delivery.Args{OrganizationID: ev.OrganizationID, EventID: ids[i]},
			InsertOpts: &river.InsertOpts{Queue: delivery.Queue, Priority: delivery.FirstPriority}}
	}
	res, err := m.river.InsertManyTx(ctx, tx, params)
	if err != nil {
		return fmt.Errorf("webhooks: enqueue: %w", database.Classify(err))
	}
	jobs := make([]int64, len(res))
	for i, r := range res {
		jobs[i] = r.Job.ID
	}
	if err := store.InsertDeliveries(ctx, tx, ev, ids, endpoints, urls, jobs); err != nil {
		return fmt.Errorf("webhooks: store deliveries: %w", database.Classify(err))
	}
	return nil
}

// CancelPendingTx cancels the organization's flow's undelivered events and
// their jobs in tx, all but flow.deleted. A delivery already under way is
// interrupted.
func (m *Module) CancelPendingTx(ctx context.Context, tx database.Tx, organizationID, flowID string) error {
	jobs, err := store.CancelPending(ctx, tx, organizationID, flowID)
	if err != nil {
		return fmt.Errorf("webhooks: cancel: %w", database.Classify(err))
	}
	for _, id := range jobs {
		if _, err := m.river.JobCancelTx(ctx, tx, id); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("webhooks: cancel job %d: %w", id, database.Classify(err))
		}
	}
	return nil
}

// CreateSecretTx makes the organization's first secret in tx; when it already
// has one, that one is returned.
func (m *Module) CreateSecretTx(ctx context.Context, tx database.Tx, organizationID string) (Secret, error) {
	s, err := store.InsertSecret(ctx, tx, organizationID, m.sealer.Seal(organizationID, signing.NewSecret()))
	if err != nil {
		return Secret{}, fmt.Errorf("webhooks: create secret: %w", database.Classify(err))
	}
	v, err := m.sealer.Open(organizationID, s.Current)
	if err != nil {
		return Secret{}, err
	}
	return Secret{Value: v, CreatedAt: s.CreatedAt}, nil
}

// RotateSecret replaces the organization's secret; the old one keeps signing
// beside the new for 24 h, so receivers can switch without losing a delivery.
// Rotating again within those 24 h drops the oldest.
func (m *Module) RotateSecret(ctx context.Context, organizationID string, before ...database.BeforeCommit[Secret]) (Secret, error) {
	v := signing.NewSecret()
	var out Secret
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		at, err := store.RotateSecret(ctx, tx, organizationID, m.sealer.Seal(organizationID, v), SigningOverlap)
		if err != nil {
			return err
		}
		out = Secret{Value: v, CreatedAt: at}
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if errors.Is(err, database.ErrNotFound) {
		return Secret{}, ErrNotFound
	}
	if err != nil {
		return Secret{}, fmt.Errorf("webhooks: rotate secret: %w", database.Classify(err))
	}
	return out, nil
}

// CurrentSecret returns the secret that signs now.
func (m *Module) CurrentSecret(ctx context.Context, organizationID string) (Secret, error) {
	s, err := store.GetSecrets(ctx, m.pool, organizationID)
	if errors.Is(err, database.ErrNotFound) {
		return Secret{}, ErrNotFound
	}
	if err != nil {
		return Secret{}, fmt.Errorf("webhooks: secret: %w", database.Classify(err))
	}
	v, err := m.sealer.Open(organizationID, s.Current)
	if err != nil {
		return Secret{}, err
	}
	return Secret{Value: v, CreatedAt: s.CreatedAt}, nil
}

// attemptsShown bounds Attempts: enough for a full retry schedule of many events.
const attemptsShown = 200

// Attempts lists the flow's delivery attempts, newest first.
func (m *Module) Attempts(ctx context.Context, organizationID, flowID string) ([]Attempt, error) {
	rows, err := store.Attempts(ctx, m.pool, organizationID, flowID, attemptsShown)
	if err != nil {
		return nil, fmt.Errorf("webhooks: attempts: %w", database.Classify(err))
	}
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = Attempt{
			EventID: r.EventID, EventType: EventType(r.EventType), At: r.At,
			StatusCode: r.StatusCode, Error: r.Error, Latency: r.Latency,
		}
	}
	return out, nil
}

func (m *Module) TaskEvents(ctx context.Context, organizationID, flowID string) (map[string]EventType, error) {
	rows, err := store.TaskEvents(ctx, m.pool, organizationID, flowID)
	if err != nil {
		return nil, fmt.Errorf("webhooks: task events: %w", database.Classify(err))
	}
	out := make(map[string]EventType, len(rows))
	for taskID, t := range rows {
		out[taskID] = EventType(t)
	}
	return out, nil
}

// RetryTask makes the newest event of the task pending again and its job
// available now (a new job when River has already cleaned the old one away).
func (m *Module) RetryTask(ctx context.Context, organizationID, taskID string, before ...database.BeforeCommit[EventType]) error {
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		ev, err := store.ResetLatestForTask(ctx, tx, organizationID, taskID)
		if errors.Is(err, database.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := m.retryJobTx(ctx, tx, ev); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, EventType(ev.Type), before)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("webhooks: retry: %w", database.Classify(err))
	}
	return err
}

// retryJobTx makes the event's job available now in tx.
func (m *Module) retryJobTx(ctx context.Context, tx database.Tx, ev store.Event) error {
	job, err := m.river.JobRetryTx(ctx, tx, ev.JobID)
	switch {
	case err == nil && job.State != rivertype.JobStateRunning:
		return nil
	case err != nil && !errors.Is(err, rivertype.ErrNotFound):
		return err
	}
	// The job is gone (pruned), or running right now, which River's retry
	// leaves alone: a new job sends at once. Should the running attempt
	// succeed first, the new job finds the event delivered and only reports.
	res, err := m.river.InsertTx(ctx, tx, delivery.Args{OrganizationID: ev.OrganizationID, EventID: ev.ID},
		&river.InsertOpts{Queue: delivery.Queue, Priority: delivery.FirstPriority})
	if err != nil {
		return err
	}
	return store.SetJob(ctx, tx, ev.OrganizationID, ev.ID, res.Job.ID)
}

// schedulePolicy is River's retry policy for deliveries: the n-th failure
// waits schedule[n-1] plus up to 20 % jitter (the last wait repeats when a
// retried job runs beyond the schedule).
type schedulePolicy []time.Duration

// NextRetry implements river.ClientRetryPolicy.
func (p schedulePolicy) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(p.wait(len(job.Errors) + 1))
}

// wait is the jittered wait after the n-th failure.
func (p schedulePolicy) wait(n int) time.Duration {
	d := p[min(max(n, 1), len(p))-1]
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// minLevel drops records below a level: it keeps River's logs to warnings.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.level}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}
