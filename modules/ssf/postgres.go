package ssf

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/ssf/internal/store"
)

// Options tune the module; the zero value of each is its default.
type Options struct {
	// Issuer is flowd's base URL: the SETs' iss, and the poll endpoints' base.
	Issuer string
	// AllowInsecure lets push endpoints be http; AllowPrivate lets them be
	// on non-public addresses (tests, development).
	AllowInsecure bool
	AllowPrivate  bool
	// Timeout bounds one push (default 10 s).
	Timeout time.Duration
	// Schedule is the waits after a stream's first, second, … failed push
	// in a row (default 1 s, 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h,
	// 4 h), each with up to 20 % more; when it is spent, or
	// after PauseAfter failures in a row (default 10), the stream is paused
	// with the reason, and enabling it again sends what it held.
	Schedule   []time.Duration
	PauseAfter int
	// LongPoll bounds a poll's wait for a SET (default 20 s; keep it shorter
	// than the server's write timeout). PollEvery is how often a waiting
	// poll looks (default 250 ms).
	LongPoll  time.Duration
	PollEvery time.Duration
	// FetchPollInterval is how often the push workers look for jobs beside
	// River's notifications (River's default when zero).
	FetchPollInterval time.Duration
	Workers           int // push workers per instance (default 20)
	// WorkerPool, when set, is the push workers' (and their River
	// client's) own pool, so that under load they do not queue for
	// connections behind API requests; SETs are still put on streams in
	// the caller's transaction.
	WorkerPool *pgxpool.Pool
	// InFlight bounds the SETs of one stream pushed at once (default 8);
	// SETs of one consent still go one after another.
	InFlight int
	// ResumeEvery is how often a push job is started for each stream
	// with pending SETs that no job will push, as after a crash
	// (default 1 min; also once when an instance leads).
	ResumeEvery time.Duration
	// Audit, when set, records in the data holder's audit log the pauses
	// flowd makes itself; the receivers' changes are recorded by the
	// callers' BeforeCommit hooks.
	Audit AuditLog
	Log   *slog.Logger
	// Registry, when set, reads each stream's lag when scraped.
	Registry prometheus.Registerer
	// Wrap, when set, wraps the pushes' transport (tracing).
	Wrap func(http.RoundTripper) http.RoundTripper
	Now  func() time.Time
}

// Module implements Streams and Transmitter on PostgreSQL.
type Module struct {
	pool    *pgxpool.Pool
	signer  Signer
	holders DataHolders
	sealer  *pii.Sealer
	issuer  string
	opts    Options
	now     func() time.Time
	workers *pgxpool.Pool // the push workers'
	active  active        // the streams this instance's push jobs hold
	// onDrained, set by tests, runs when a holder finds nothing pending,
	// before it lets the stream go.
	onDrained func()
	river     *river.Client[database.Tx]
	client    *http.Client
	log       *slog.Logger
}

var (
	_ Streams     = (*Module)(nil)
	_ Transmitter = (*Module)(nil)
)

// AuditLog records flowd's own changes of a stream (identity's audit log).
type AuditLog interface {
	RecordAuditTx(ctx context.Context, tx database.Tx, e identity.AuditEntry) error
}

// New returns the module; sealer seals the push Authorization headers at
// rest. It touches no database until Run.
func New(pool *pgxpool.Pool, signer Signer, holders DataHolders, sealer *pii.Sealer, opts Options) (*Module, error) {
	if sealer == nil {
		return nil, errors.New("ssf: a sealer is required for the push Authorization headers")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if len(opts.Schedule) == 0 {
		opts.Schedule = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute,
			30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour}
	}
	if opts.PauseAfter <= 0 {
		opts.PauseAfter = 10
	}
	if opts.LongPoll <= 0 {
		opts.LongPoll = 20 * time.Second
	}
	if opts.PollEvery <= 0 {
		opts.PollEvery = 250 * time.Millisecond
	}
	if opts.Workers <= 0 {
		opts.Workers = 20
	}
	if opts.InFlight <= 0 {
		opts.InFlight = 8
	}
	if opts.ResumeEvery <= 0 {
		opts.ResumeEvery = time.Minute
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Module{pool: pool, signer: signer, holders: holders, sealer: sealer, issuer: strings.TrimSuffix(opts.Issuer, "/"), opts: opts,
		now: opts.Now, log: opts.Log, workers: cmp.Or(opts.WorkerPool, pool)}
	if err := m.newPusher(); err != nil {
		return nil, err
	}
	if opts.Registry != nil {
		if err := opts.Registry.Register(m.lagCollector()); err != nil {
			return nil, fmt.Errorf("ssf: %w", err)
		}
	}
	return m, nil
}

// Issuer is the SETs' iss.
func (m *Module) Issuer() string { return m.issuer }

// PollURL is where a poll stream's receiver polls.
func (m *Module) PollURL(id string) string { return m.issuer + "/ssf/poll/" + id }

func validStreamID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

func toStream(r store.Stream) Stream {
	return Stream{ID: r.ID, OrganizationID: r.OrganizationID, Audience: r.Aud, Description: r.Description,
		Delivery:        Delivery{Method: r.DeliveryMethod, EndpointURL: r.EndpointURL},
		EventsRequested: r.EventsRequested, EventsDelivered: r.EventsDelivered, Status: Status(r.Status), StatusReason: r.StatusReason,
		Failures: r.Failures, LastError: r.LastError, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// authorizationContext binds a sealed Authorization header to its stream.
func authorizationContext(r store.Stream) []string {
	return []string{"ssf stream authorization", r.OrganizationID, r.ID}
}

// authorization opens a stream's sealed Authorization header.
func (m *Module) authorization(r store.Stream) (string, error) {
	if r.AuthorizationKeyID == "" {
		return "", nil
	}
	return m.sealer.Open(r.AuthorizationKeyID, r.AuthorizationSealed, authorizationContext(r)...)
}

// ResealBatch seals again under the current data key up to limit of the
// Authorization headers an older key sealed, and returns how many
// (flowd keys rotate-data-key).
func (m *Module) ResealBatch(ctx context.Context, limit int) (int, error) {
	current := m.sealer.KeyID()
	stale, err := store.StaleAuthorizations(ctx, m.pool, current, limit)
	if err != nil {
		return 0, err
	}
	err = database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		for _, r := range stale {
			v, err := m.authorization(r)
			if err != nil {
				return fmt.Errorf("stream %s (key %s): %w", r.ID, r.AuthorizationKeyID, err)
			}
			if err := store.Reseal(ctx, tx, r, current, m.sealer.Seal(v, authorizationContext(r)...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(stale), nil
}

// apply sets c on row r (all of it when replace), as a create, PATCH or PUT does.
func (m *Module) apply(r *store.Stream, c StreamConfig, replace bool) {
	if c.Description != nil || replace {
		r.Description = deref(c.Description)
	}
	if c.EventsRequested != nil || replace {
		r.EventsRequested = slices.Clone(deref(c.EventsRequested))
		if r.EventsRequested == nil {
			r.EventsRequested = []string{}
		}
		r.EventsDelivered = Delivered(r.EventsRequested)
	}
	if d := c.Delivery; d != nil {
		r.DeliveryMethod, r.EndpointURL = d.Method, d.EndpointURL
		r.AuthorizationSealed, r.AuthorizationKeyID = nil, ""
		if d.Method == DeliveryPoll {
			r.EndpointURL = m.PollURL(r.ID)
		} else if d.AuthorizationHeader != "" {
			r.AuthorizationSealed, r.AuthorizationKeyID = m.sealer.Seal(d.AuthorizationHeader, authorizationContext(*r)...), m.sealer.KeyID()
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// CreateStream implements Streams.
func (m *Module) CreateStream(ctx context.Context, o Owner, c StreamConfig, before ...database.BeforeCommit[Stream]) (Stream, error) {
	if err := ValidateConfig(c, true, m.opts.AllowInsecure); err != nil {
		return Stream{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Stream{}, err
	}
	now := m.now().UTC().Truncate(time.Microsecond)
	r := store.Stream{OrganizationID: o.OrganizationID, ID: id.String(), Aud: []string{o.ClientID}, Status: string(Enabled),
		CreatedBy: "client:" + o.ClientID, CreatedAt: now, UpdatedAt: now}
	m.apply(&r, c, true)
	err = database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		if err := store.InsertStream(ctx, tx, r); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, toStream(r), before)
	})
	if err != nil {
		return Stream{}, err
	}
	return toStream(r), nil
}

// Stream implements Streams.
func (m *Module) Stream(ctx context.Context, organizationID, id string) (Stream, error) {
	if !validStreamID(id) {
		return Stream{}, ErrStreamNotFound
	}
	r, err := store.GetStream(ctx, m.pool, organizationID, id, false)
	if errors.Is(err, database.ErrNotFound) {
		return Stream{}, ErrStreamNotFound
	}
	if err != nil {
		return Stream{}, err
	}
	return toStream(r), nil
}

// ListStreams implements Streams.
func (m *Module) ListStreams(ctx context.Context, organizationID string) ([]Stream, error) {
	rows, err := store.ListStreams(ctx, m.pool, organizationID)
	if err != nil {
		return nil, err
	}
	out := make([]Stream, len(rows))
	for i, r := range rows {
		out[i] = toStream(r)
	}
	return out, nil
}

// change runs fn on a stream locked in a transaction of its own, then
// before with the stream as fn left it.
func (m *Module) change(ctx context.Context, organizationID, id string, fn func(tx database.Tx, r *store.Stream) error,
	before ...database.BeforeCommit[Stream]) (Stream, error) {
	if !validStreamID(id) {
		return Stream{}, ErrStreamNotFound
	}
	var out store.Stream
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		r, err := store.GetStream(ctx, tx, organizationID, id, true)
		if errors.Is(err, database.ErrNotFound) {
			return ErrStreamNotFound
		}
		if err != nil {
			return err
		}
		if err := fn(tx, &r); err != nil {
			return err
		}
		out = r
		return database.RunBeforeCommit(ctx, tx, toStream(r), before)
	})
	if err != nil {
		return Stream{}, err
	}
	return toStream(out), nil
}

// UpdateStream implements Streams.
func (m *Module) UpdateStream(ctx context.Context, organizationID, id string, c StreamConfig, replace bool,
	before ...database.BeforeCommit[Stream]) (Stream, error) {
	if err := ValidateConfig(c, replace, m.opts.AllowInsecure); err != nil {
		return Stream{}, err
	}
	return m.change(ctx, organizationID, id, func(tx database.Tx, r *store.Stream) error {
		wasPush := r.DeliveryMethod == DeliveryPush
		m.apply(r, c, replace)
		if err := store.SaveStream(ctx, tx, *r); err != nil {
			return err
		}
		// A stream turned to push sends what it held for polls.
		if !wasPush && r.DeliveryMethod == DeliveryPush && Status(r.Status) == Enabled {
			return m.startPushTx(ctx, tx, []store.Stream{*r})
		}
		return nil
	}, before...)
}

// DeleteStream implements Streams.
func (m *Module) DeleteStream(ctx context.Context, organizationID, id string, before ...database.BeforeCommit[Stream]) error {
	_, err := m.change(ctx, organizationID, id, func(tx database.Tx, r *store.Stream) error {
		_, err := store.DeleteStream(ctx, tx, organizationID, id)
		return err
	}, before...)
	return err
}

// SetStatus implements Streams.
func (m *Module) SetStatus(ctx context.Context, organizationID, id string, s Status, reason string,
	before ...database.BeforeCommit[Stream]) (Stream, error) {
	var f apperr.Fields
	if !s.Valid() {
		f.Add("status", "must be enabled, paused or disabled")
	}
	if len(reason) > MaxReason || strings.ContainsFunc(reason, isControl) {
		f.Add("reason", "must be at most %d characters without control characters", MaxReason)
	}
	if err := f.Err(); err != nil {
		return Stream{}, err
	}
	return m.change(ctx, organizationID, id, func(tx database.Tx, r *store.Stream) error {
		r.Status, r.StatusReason = string(s), reason
		if s == Enabled {
			r.Failures, r.LastError = 0, ""
		}
		if err := store.SaveStream(ctx, tx, *r); err != nil {
			return err
		}
		// The receiver says it is ready: a backoff no longer applies.
		if s == Enabled {
			if err := store.EndBackoff(ctx, tx, organizationID, id); err != nil {
				return err
			}
		}
		switch {
		case s == Disabled:
			return store.DropPending(ctx, tx, organizationID, id)
		case s == Enabled && r.DeliveryMethod == DeliveryPush:
			return m.startPushTx(ctx, tx, []store.Stream{*r})
		}
		return nil
	}, before...)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Verify implements Streams.
func (m *Module) Verify(ctx context.Context, organizationID, id, state string) error {
	if len(state) > MaxState || strings.ContainsFunc(state, isControl) {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "state", Message: "must be at most 500 characters without control characters"}})
	}
	_, err := m.change(ctx, organizationID, id, func(tx database.Tx, r *store.Stream) error {
		if Status(r.Status) == Disabled {
			return apperr.New(apperr.Conflict, "The stream is disabled: enable it to verify it.")
		}
		event := map[string]any{}
		if state != "" {
			event["state"] = state
		}
		return m.streamEventTx(ctx, tx, *r, EventVerification, event)
	})
	return err
}

// AddSubject implements Streams.
func (m *Module) AddSubject(ctx context.Context, organizationID, id, consentID string) error {
	return m.subject(ctx, organizationID, id, consentID, store.AddSubject)
}

// RemoveSubject implements Streams.
func (m *Module) RemoveSubject(ctx context.Context, organizationID, id, consentID string) error {
	return m.subject(ctx, organizationID, id, consentID, store.RemoveSubject)
}

func (m *Module) subject(ctx context.Context, organizationID, id, consentID string,
	fn func(context.Context, database.Querier, string, string, string) error) error {
	if consentID == "" || len(consentID) > 100 || strings.ContainsFunc(consentID, isControl) {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "subject", Message: `must be {"format": "opaque", "id": "<flowId>"}, or a complex subject with such a consent`}})
	}
	_, err := m.change(ctx, organizationID, id, func(tx database.Tx, r *store.Stream) error {
		return fn(ctx, tx, organizationID, id, consentID)
	})
	return err
}
