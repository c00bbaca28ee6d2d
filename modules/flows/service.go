package flows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/expiry"
	"github.com/flowd/flowd/modules/flows/internal/ids"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/webhooks"
)

// Config holds the settings of the flows module.
type Config struct {
	// NationalIDs is the national id format (FLOWD_NATIONAL_ID_FORMAT) with
	// the clock its numbers are read against; the zero Format is generic.
	NationalIDs       nationalid.Format
	AllowInsecureURLs bool          // FLOWD_ALLOW_INSECURE_URLS
	ConsentTTL        time.Duration // FLOWD_CONSENT_TTL; zero means 30 days
	// ReadRoundTrips bounds the round trips that retrieves and list pages
	// share (FLOWD_DB_READ_ROUND_TRIPS). More in flight than the database
	// has cores to run them only adds wake-ups: each carries fewer reads.
	// Zero means one per CPU, at least 2; never more than the pool's
	// connections.
	ReadRoundTrips int
	// MaintenanceInterval is how often Run expires due flows
	// (FLOWD_MAINTENANCE_INTERVAL); zero means a minute.
	MaintenanceInterval time.Duration
	// ExpiringNotice is how long before an acceptance's validity ends Run
	// publishes its flow.expiring (FLOWD_CONSENT_EXPIRING_NOTICE); zero
	// publishes none.
	ExpiringNotice time.Duration
	// ExpiryPollInterval is how often RunExpiry's workers look for due
	// expiry jobs; zero means a second.
	ExpiryPollInterval time.Duration
	// ExpiryMiddleware is the expiry jobs' River middleware (tracing's).
	ExpiryMiddleware []rivertype.Middleware
	// PersonIndex makes each new flow's blind index, by which the person's
	// own page finds their flows; nil makes none (a test of something else).
	PersonIndex *nationalid.BlindIndex
	// Retention gives how long completed flows are kept (the consent
	// module's definitions); nil keeps them until they are deleted.
	Retention Retentions
}

// Limits of the API.
const (
	DefaultLimit = 10
	MaxLimit     = 100
)

// Manager is the flows module: it implements Service on PostgreSQL, moves
// flows along for the consent module (MarkOpenedTx, and LockTx with
// RecordDecisionTx or RecordWithdrawalTx) and, in Run, expires them;
// RunExpiry expires acceptances whose validity ended.
type Manager struct {
	pool    *pgxpool.Pool
	reads   *store.SharedReads
	sealer  *pii.Sealer
	consent ConsentRequests
	defs    Definitions
	orgs    Organizations
	events  Events
	log     *slog.Logger
	cfg     Config
	jobs    *expiry.Jobs // consent expiry
	// decisions counts the decisions and withdrawals recorded.
	decisions *prometheus.CounterVec
	keys      *keyCache // opened subject keys
	uses      *useWriter
}

var _ Service = (*Manager)(nil)

// New returns the flows module. Every collaborator is required: reg
// receives how many reads each shared round trip carried
// (flowd_db_reads_per_round_trip), the decisions recorded
// (flowd_consent_decisions_total) and the outcomes of the expiry jobs; log
// what Run could not do.
func New(pool *pgxpool.Pool, sealer *pii.Sealer, consent ConsentRequests, defs Definitions,
	orgs Organizations, events Events, log *slog.Logger, reg prometheus.Registerer, cfg Config) *Manager {
	if cfg.ConsentTTL <= 0 {
		cfg.ConsentTTL = 30 * 24 * time.Hour
	}
	if cfg.MaintenanceInterval <= 0 {
		cfg.MaintenanceInterval = time.Minute
	}
	if cfg.ExpiryPollInterval <= 0 {
		cfg.ExpiryPollInterval = time.Second
	}
	slots := readRoundTrips(cfg.ReadRoundTrips, runtime.GOMAXPROCS(0), int(pool.Config().MaxConns))
	m := &Manager{pool: pool, reads: store.NewSharedReads(pool, slots, readsPerRoundTrip(reg)),
		sealer: sealer, consent: consent, defs: defs, orgs: orgs, events: events, log: log, cfg: cfg,
		decisions: decisionsCounter(reg), keys: newKeyCache()}
	m.uses = newUseWriter(pool, m.publishUseTx)
	m.jobs = expiry.New(pool, expiry.Work{Expire: m.expireAcceptance, ExpireDue: m.ExpireDueAcceptances,
		EraseRetained: m.EraseRetained}, log, reg,
		expiry.Config{PollInterval: cfg.ExpiryPollInterval, Middleware: cfg.ExpiryMiddleware})
	return m
}

// readRoundTrips is how many shared read round trips may be in flight:
// the setting, or one per CPU and at least 2, and never more than the
// pool's connections, which other work needs too.
func readRoundTrips(setting, cpus, poolConns int) int {
	n := setting
	if n <= 0 {
		n = max(2, cpus)
	}
	return max(1, min(n, poolConns))
}

// readsPerRoundTrip registers the histogram of reads per shared round trip
// and returns what observes it.
func readsPerRoundTrip(reg prometheus.Registerer) func(int) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "flowd_db_reads_per_round_trip",
		Help:    "Retrieves and list pages sent in one shared round trip to PostgreSQL.",
		Buckets: []float64{1, 2, 4, 8, 16},
	})
	reg.MustRegister(h)
	return func(n int) { h.Observe(float64(n)) }
}

// Create implements Service.
func (m *Manager) Create(ctx context.Context, c Caller, in NewFlow, before ...database.BeforeCommit[Created]) (Created, error) {
	if c.OrganizationID == "" {
		return Created{}, errors.New("flows: create without an organization")
	}
	in = in.Normalize()
	settings, err := m.orgs.FlowSettings(ctx, c.OrganizationID)
	if err != nil {
		return Created{}, fmt.Errorf("flows: organization settings: %w", err)
	}
	if err := in.Validate(Rules{NationalIDs: m.cfg.NationalIDs, AllowInsecureURLs: m.cfg.AllowInsecureURLs,
		RedirectOrigins: settings.RedirectOrigins}); err != nil {
		return Created{}, err
	}

	var (
		out  Created
		keep = func() {}
	)
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		f, consentURL, keepKey, err := m.createTx(ctx, tx, c, in, ids.New(), settings)
		if err != nil {
			return err
		}
		keep = keepKey
		out = Created{FlowID: f.ID, ReferenceID: f.ReferenceID, ConsentURL: consentURL}
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil {
		return Created{}, err
	}
	keep()
	return out, nil
}

// createTx writes the flow, its consent request, its tasks and its
// flow.created event in tx. keep remembers the person's subject key once
// tx has committed.
func (m *Manager) createTx(ctx context.Context, tx pgx.Tx, c Caller, in NewFlow, flowID string, settings OrganizationSettings) (_ Flow, _ string, keep func(), _ error) {
	prefix := settings.ReferencePrefix
	if prefix == "" {
		prefix = "FLOW"
	}
	pinned, err := m.defs.PinTx(ctx, tx, c.OrganizationID, in.FlowDefinitionID, in.FlowDefinitionVersion)
	if err != nil {
		return Flow{}, "", nil, err
	}
	if err := CheckParameters(in.Parameters, pinned.Parameters, pinned.ID, pinned.Version); err != nil {
		return Flow{}, "", nil, err
	}
	// The flow keeps the id as written unless its reading depends on the
	// date (a Swedish 10-digit number): then it keeps the canonical form.
	if in.NationalID, err = m.cfg.NationalIDs.ToKeep(in.NationalID); err != nil {
		return Flow{}, "", nil, err
	}
	row := m.newRow(c, in, flowID, settings, pinned)
	// The flow, its number and its tasks (the consent task, and the task
	// that tracks the flow.created delivery when there is a webhook) go in
	// one round trip.
	tasks := []*store.Task{{OrganizationID: c.OrganizationID, ID: ids.New(), FlowID: flowID, TaskType: TaskConsent,
		TaskCategory: CategoryUserTask, Status: TaskPending}}
	var deliveryTask string
	if in.WebhookURL != "" {
		deliveryTask = ids.New()
		tasks = append(tasks, &store.Task{OrganizationID: c.OrganizationID, ID: deliveryTask, FlowID: flowID, TaskType: TaskSendInitiateWebhook,
			TaskCategory: CategoryServiceTask, Status: TaskPending})
	}
	key, keep, err := m.insertUnderSubjectKey(ctx, tx, &row, in, prefix, tasks)
	if err != nil {
		return Flow{}, "", nil, err
	}
	consentURL, err := m.consent.CreateTx(ctx, tx, c.OrganizationID, flowID)
	if err != nil {
		return Flow{}, "", nil, err
	}
	f, err := m.flowOf(row, sealerOpener(key.Sealer, key.Sealer.KeyID()))
	if err != nil {
		return Flow{}, "", nil, err
	}
	// flow.created is the flow's first event: the insert counted it.
	created := eventOf(f, webhooks.FlowCreated, deliveryTask)
	created.Sequence = 1
	if err := m.events.PublishTx(ctx, tx, created); err != nil {
		return Flow{}, "", nil, err
	}
	return f, consentURL, keep, nil
}

// publishTx stores the flow's next event, numbered in its sequence, and,
// when the flow has a webhook, the send-initiate-webhook task that tracks
// its delivery. The caller holds the flow locked.
func (m *Manager) publishTx(ctx context.Context, tx pgx.Tx, f Flow, typ webhooks.EventType) error {
	seq, err := store.NextEventSequence(ctx, tx, f.OrganizationID, f.ID)
	if err != nil {
		return err
	}
	ev := eventOf(f, typ, "")
	ev.Sequence = seq
	if f.WebhookURL != "" {
		task := store.Task{OrganizationID: f.OrganizationID, ID: ids.New(), FlowID: f.ID, TaskType: TaskSendInitiateWebhook, TaskCategory: CategoryServiceTask, Status: TaskPending}
		if err := store.InsertTask(ctx, tx, &task); err != nil {
			return err
		}
		ev.TaskID = task.ID
	}
	return m.events.PublishTx(ctx, tx, ev)
}

func eventOf(f Flow, typ webhooks.EventType, taskID string) webhooks.Event {
	return webhooks.Event{
		Type: typ, FlowID: f.ID, ReferenceID: f.ReferenceID, OrganizationID: f.OrganizationID,
		Status: string(f.ConsentStatus), FlowStatus: string(f.ProcessStatus), Version: f.Version,
		FlowDefinitionID: f.FlowDefinitionID, FlowDefinitionVersion: f.FlowDefinitionVersion, WithdrawnBy: f.WithdrawnBy,
		URL: f.WebhookURL, TaskID: taskID, OccurredAt: f.UpdatedAt,
	}
}

func notFound(err error) error {
	if errors.Is(err, database.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Get implements Service.
func (m *Manager) Get(ctx context.Context, c Caller, flowID string) (Flow, error) {
	if !ids.Valid(flowID) || c.OrganizationID == "" {
		return Flow{}, ErrNotFound
	}
	// The consent link is read in the same round trip as the flow: it does
	// not depend on the flow's row, and it is used only once the flow has
	// been found as the caller's.
	var consentURL func() (string, error)
	row, incidents, err := m.reads.GetFlowAndIncidents(ctx, c.OrganizationID, flowID, func(read database.SharedRead) {
		consentURL = m.consent.QueueURL(read, c.OrganizationID, flowID)
	})
	if err != nil {
		return Flow{}, notFound(err)
	}
	return m.complete(row, incidents, consentURL)
}

// complete turns a row and its open incidents into a Flow with its consent
// link, which consentURL gives.
func (m *Manager) complete(row store.Flow, incidents []store.Incident, consentURL func() (string, error)) (Flow, error) {
	f, err := m.toFlow(row)
	if err != nil {
		return Flow{}, err
	}
	return withLinks(f, incidents, consentURL)
}

// withLinks adds a flow's open incidents and its consent link, which
// consentURL gives.
func withLinks(f Flow, incidents []store.Incident, consentURL func() (string, error)) (Flow, error) {
	f = withIncidents(f, incidents)
	var err error
	if f.ConsentURL, err = consentURL(); err != nil {
		return Flow{}, fmt.Errorf("flows: consent link of %s: %w", f.ID, err)
	}
	return f, nil
}

// completeTx adds to f, just changed in tx, what Get shows besides its row:
// its open incidents and its consent link, read in tx in one round trip.
// Cancel answers with it and hands it to its before hooks, so that what a
// hook records (the API's answer to an Idempotency-Key) is the flow as the
// caller is told it.
func (m *Manager) completeTx(ctx context.Context, tx pgx.Tx, f Flow) (Flow, error) {
	var consentURL func() (string, error)
	incidents, err := store.OpenIncidentsWith(ctx, tx, f.OrganizationID, f.ID, func(read database.SharedRead) {
		consentURL = m.consent.QueueURL(read, f.OrganizationID, f.ID)
	})
	if err != nil {
		return Flow{}, err
	}
	return withLinks(f, incidents, consentURL)
}

// Tasks implements Service.
func (m *Manager) Tasks(ctx context.Context, c Caller, flowID string) ([]Task, error) {
	if !ids.Valid(flowID) || c.OrganizationID == "" {
		return nil, ErrNotFound
	}
	var out []Task
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := store.GetFlow(ctx, tx, c.OrganizationID, flowID, false); err != nil {
			return notFound(err)
		}
		rows, err := store.Tasks(ctx, tx, c.OrganizationID, flowID)
		for _, t := range rows {
			out = append(out, toTask(t))
		}
		return err
	})
	return out, err
}

func toTask(t store.Task) Task {
	return Task{ID: t.ID, FlowID: t.FlowID, TaskType: t.TaskType, TaskCategory: t.TaskCategory, Status: t.Status,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// Cancel implements Service.
func (m *Manager) Cancel(ctx context.Context, c Caller, flowID string, cond etag.IfMatch, before ...database.BeforeCommit[Flow]) (Flow, error) {
	if !ids.Valid(flowID) || c.OrganizationID == "" {
		return Flow{}, ErrNotFound
	}
	var out Flow
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		row, err := lockedFlowIfMatch(ctx, tx, c.OrganizationID, flowID, cond)
		if err != nil {
			return err
		}
		if row.ProcessStatus != string(Active) {
			return ErrNotActive
		}
		f, err := m.cancelTx(ctx, tx, row)
		if err != nil {
			return err
		}
		if out, err = m.completeTx(ctx, tx, f); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil {
		return Flow{}, err
	}
	return out, nil
}

// cancelTx ends an active flow's process: cancelled, its consent task too,
// and a flow.cancelled event.
func (m *Manager) cancelTx(ctx context.Context, tx pgx.Tx, row store.Flow) (Flow, error) {
	row.ProcessStatus = string(Cancelled)
	if err := store.SaveState(ctx, tx, &row); err != nil {
		return Flow{}, err
	}
	if err := store.SetTasksStatus(ctx, tx, row.OrganizationID, row.ID, TaskConsent, TaskPending, TaskCancelled); err != nil {
		return Flow{}, err
	}
	f, err := m.toFlow(row)
	if err != nil {
		return Flow{}, err
	}
	return f, m.publishTx(ctx, tx, f, webhooks.FlowCancelled)
}

// Delete implements Service.
func (m *Manager) Delete(ctx context.Context, c Caller, flowID string, cond etag.IfMatch, before ...database.BeforeCommit[Deletion]) (Deletion, error) {
	if !ids.Valid(flowID) || c.OrganizationID == "" {
		return Deletion{}, ErrNotFound
	}
	var d store.Deletion
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		row, err := lockedFlowIfMatch(ctx, tx, c.OrganizationID, flowID, cond)
		if err != nil {
			return err
		}
		if d, err = m.deleteLockedTx(ctx, tx, row, c.ClientID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, toDeletion(d), before)
	})
	if err != nil {
		return Deletion{}, err
	}
	return toDeletion(d), nil
}

// deleteLockedTx deletes row, locked in tx, as Delete does: its consent
// link, its pending deliveries, its receipts and the flow go, the deletion
// is logged with nothing personal, and flow.deleted is published.
func (m *Manager) deleteLockedTx(ctx context.Context, tx pgx.Tx, row store.Flow, by string) (store.Deletion, error) {
	if err := m.consent.DeleteTx(ctx, tx, row.OrganizationID, row.ID); err != nil {
		return store.Deletion{}, err
	}
	if err := m.events.CancelPendingTx(ctx, tx, row.OrganizationID, row.ID); err != nil {
		return store.Deletion{}, err
	}
	receiptIDs, err := store.DeleteAttachments(ctx, tx, row.OrganizationID, row.ID)
	if err != nil {
		return store.Deletion{}, err
	}
	seq, err := store.NextEventSequence(ctx, tx, row.OrganizationID, row.ID)
	if err != nil {
		return store.Deletion{}, err
	}
	if err := store.DeleteFlow(ctx, tx, row.OrganizationID, row.ID); err != nil {
		return store.Deletion{}, err
	}
	d := store.Deletion{OrganizationID: row.OrganizationID, FlowID: row.ID, ReferenceID: row.ReferenceID,
		DeletedBy: by, ReceiptIDs: receiptIDs}
	if err := store.InsertDeletion(ctx, tx, &d); err != nil {
		return store.Deletion{}, err
	}
	// The event carries no personal data; the deletion is the flow's last change.
	return d, m.events.PublishTx(ctx, tx, webhooks.Event{
		Type: webhooks.FlowDeleted, FlowID: row.ID, ReferenceID: row.ReferenceID, OrganizationID: row.OrganizationID,
		Status: row.ConsentStatus, FlowStatus: row.ProcessStatus, Version: row.Version + 1, Sequence: seq,
		FlowDefinitionID: row.FlowDefinitionID, FlowDefinitionVersion: row.FlowDefinitionVersion, URL: row.WebhookURL, OccurredAt: d.DeletedAt,
	})
}

func toDeletion(d store.Deletion) Deletion {
	return Deletion{FlowID: d.FlowID, ReferenceID: d.ReferenceID, DeletedBy: d.DeletedBy, ReceiptIDs: d.ReceiptIDs, DeletedAt: d.DeletedAt}
}

// DeletionOf returns the deletion log's entry of an organization's flow,
// deleted or erased: the consent record of a flow that is gone. ErrNotFound
// when the flow was never deleted.
func (m *Manager) DeletionOf(ctx context.Context, organizationID, flowID string) (Deletion, error) {
	if !ids.Valid(flowID) || organizationID == "" {
		return Deletion{}, ErrNotFound
	}
	d, err := store.DeletionOf(ctx, m.pool, organizationID, flowID)
	if err != nil {
		return Deletion{}, notFound(err)
	}
	return toDeletion(d), nil
}

// Deletions implements Service.
func (m *Manager) Deletions(ctx context.Context, organizationID string, limit int, before string) ([]Deletion, bool, error) {
	if limit < 1 || limit > MaxLimit {
		limit = DefaultLimit
	}
	if before != "" && !ids.Valid(before) {
		return nil, false, apperr.InvalidFields([]apperr.FieldError{{Field: "before", Message: "must be a flow id"}})
	}
	rows, err := store.Deletions(ctx, m.pool, organizationID, limit, before)
	if err != nil {
		return nil, false, err
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]Deletion, len(rows))
	for i, r := range rows {
		out[i] = toDeletion(r)
	}
	return out, more, nil
}

// Run expires due flows and publishes flow.expiring for acceptances whose
// validity ends within the notice every MaintenanceInterval until ctx ends, and then returns nil; what it cannot
// do it logs and tries again next time. Several instances may run it at
// once: expiry skips the rows another instance holds.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.MaintenanceInterval)
	defer t.Stop()
	for {
		m.maintain(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// maintain expires every due flow and notifies every expiring acceptance, a
// hundred at a time.
func (m *Manager) maintain(ctx context.Context) {
	const batch = 100
	for ctx.Err() == nil {
		n, err := m.ExpireDue(ctx, time.Now(), batch)
		if err != nil && ctx.Err() == nil {
			m.log.WarnContext(ctx, "flows: expiring flows", "error", err.Error())
		}
		if err != nil || n < batch {
			break
		}
	}
	for ctx.Err() == nil {
		n, err := m.NotifyExpiringAcceptances(ctx, batch)
		if err != nil && ctx.Err() == nil {
			m.log.WarnContext(ctx, "flows: notifying expiring acceptances", "error", err.Error())
		}
		if err != nil || n < batch {
			break
		}
	}
}
