package wiring

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/telemetry"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/taskreports"
	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/modules/webhooks"
)

// Env is where modules are built: the settings, the pool, and what serve
// adds (its logger, metrics registry and tracing). An admin command leaves
// those out: its modules log nothing and their metrics go nowhere.
type Env struct {
	Config *config.Config
	Pool   *pgxpool.Pool
	// WebhookPool is the webhook and SSF push workers' own pool (serve
	// gives them one, so that deliveries do not queue behind API
	// requests); nil is Pool.
	WebhookPool *pgxpool.Pool
	Log         *slog.Logger         // nil discards
	Registry    *prometheus.Registry // nil: one of the modules' own
	Tracing     *telemetry.Tracing   // nil: off
}

func (e Env) log() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

func (e Env) registry() *prometheus.Registry {
	if e.Registry == nil {
		return prometheus.NewRegistry()
	}
	return e.Registry
}

// Modules are flowd's modules, each built once from its explicit
// dependencies, for serve and the admin commands alike: what an operator's
// command changes, it changes as the server would.
type Modules struct {
	*Identity
	// Directory is what other modules ask of identity's organizations.
	Directory OrganizationDirectory
	Sealer    *pii.Sealer
	Webhooks  *webhooks.Module
	// Endpoints are the organizations' webhook endpoints.
	Endpoints   *webhooks.EndpointStore
	Requests    *consent.Requests
	Definitions *consent.DefinitionStore
	Resources   *consent.ResourceStore
	Records     *consent.RecordService
	Receipts    *receipts.Service
	Flows       *flows.Manager
	// Answers are the API's answers to requests with an Idempotency-Key.
	Answers     *idempotency.Keys
	Journey     *consent.JourneyService
	Withdrawals *consent.WithdrawalService
	Erasures    *erasure.Module
	// SSF is the Shared Signals transmitter: data holders' streams.
	SSF *ssf.Module
}

// NewModules builds every module but identity's parts, which ident holds,
// on env. It needs the secrets (config.Need.Secrets) and touches no
// database.
func NewModules(env Env, ident *Identity) (*Modules, error) {
	cfg, pool, log := env.Config, env.Pool, env.log()
	reg := env.registry()
	hooks, err := NewWebhooks(env)
	if err != nil {
		return nil, err
	}
	sealer, err := NewSealer(cfg)
	if err != nil {
		return nil, err
	}
	m := &Modules{Identity: ident, Directory: NewOrganizationDirectory(ident.Orgs, ident.Audit), Sealer: sealer, Webhooks: hooks}
	m.Endpoints = webhooks.NewEndpoints(pool, webhooks.EndpointRules{AllowInsecureURLs: cfg.AllowInsecureURLs,
		AllowPrivate: cfg.WebhookAllowPrivate})
	base := cfg.BaseURL.String()
	m.Requests = consent.NewRequests(pool, sealer, base)
	m.Definitions = consent.NewDefinitions(pool, m.Directory)
	m.Resources = consent.NewResources(pool)
	m.Receipts = receipts.New(pool, ident.Keys, m.Directory, base)
	if m.SSF, err = NewSSF(env, ident, m.Definitions, sealer); err != nil {
		return nil, err
	}
	// Flow events go out through the webhooks module, whose workers report
	// their delivery tasks back to flows, and those that end a consent
	// through Shared Signals too.
	m.Flows = flows.New(pool, sealer, m.Requests, m.Definitions, m.Directory, flowEvents{hooks, m.SSF}, log, reg, flows.Config{
		NationalIDs: cfg.NationalIDs(nil), AllowInsecureURLs: cfg.AllowInsecureURLs, ConsentTTL: cfg.ConsentTTL,
		ReadRoundTrips: cfg.DBReadRoundTrips, MaintenanceInterval: cfg.MaintenanceInterval,
		ExpiringNotice: cfg.ConsentExpiringNotice, ExpiryMiddleware: env.Tracing.RiverLinkedMiddleware(),
		PersonIndex: nationalid.NewBlindIndex(cfg.KeyEncryptionKey, cfg.NationalIDs(nil)), Retention: m.Definitions,
	})
	m.Records = consent.NewRecords(m.Flows, m.Definitions, m.Resources, m.Directory, m.Receipts, base)
	m.Answers = idempotency.New(pool, sealer, log, cfg.MaintenanceInterval)
	m.Journey = consent.NewJourney(pool, m.Requests, m.Flows, m.Definitions, m.Receipts, m.Directory, m.Directory,
		cfg.ConsentACRMap, log)
	m.Withdrawals = consent.NewWithdrawals(pool, m.Requests, m.Flows, m.Definitions, m.Receipts)
	m.Erasures = erasure.New(erasure.Deps{Pool: pool, Flows: m.Flows, Keys: m.Flows, Subjects: m.Receipts,
		Answers: m.Answers, Events: hooks, Audit: ident.Audit, Signer: ident.Keys, Orgs: m.Directory,
		KeyEncryptionKey: cfg.KeyEncryptionKey, Issuer: base})
	return m, nil
}

// NewWebhooks builds the webhooks module on env's webhook pool; its
// workers report their delivery tasks to flows (taskreports). It needs
// FLOWD_KEY_ENCRYPTION_KEY, which seals the signing secrets.
func NewWebhooks(env Env) (*webhooks.Module, error) {
	cfg, pool := env.Config, env.WebhookPool
	if pool == nil {
		pool = env.Pool
	}
	return webhooks.New(pool, taskreports.New(pool), webhooks.Options{
		Timeout: cfg.WebhookTimeout, AllowPrivate: cfg.WebhookAllowPrivate, KeyEncryptionKey: cfg.KeyEncryptionKey,
		Schedule: cfg.WebhookRetrySchedule, EventRetention: cfg.EventRetention, DisableAfter: cfg.WebhookDisableAfter,
		HostConcurrency: cfg.WebhookHostConcurrency, Log: env.log(), Registry: env.registry(),
		Middleware: env.Tracing.RiverMiddleware(), Transport: env.Tracing.WrapTransport("webhook delivery"),
	})
}

// NewSSF builds the Shared Signals transmitter: its SETs are signed by
// identity's receipt key, and the data holders a consent concerns are those
// whose resources its definition names. The push workers share the webhook
// workers' pool; the push Authorization headers are sealed under the data
// key, and flowd's own pauses go to the audit log.
func NewSSF(env Env, ident *Identity, holders ssf.DataHolders, sealer *pii.Sealer) (*ssf.Module, error) {
	cfg := env.Config
	return ssf.New(env.Pool, ident.Keys, holders, sealer, ssf.Options{
		Issuer: cfg.BaseURL.String(), AllowInsecure: cfg.AllowInsecureURLs, AllowPrivate: cfg.WebhookAllowPrivate,
		Timeout: cfg.WebhookTimeout, Log: env.log(), Wrap: env.Tracing.WrapTransport("ssf push"), Audit: ident.Audit,
		Registry: env.registry(), WorkerPool: env.WebhookPool,
	})
}

// NewSealer seals personal data under FLOWD_DATA_KEY and opens what the
// keys of FLOWD_DATA_KEY_PREVIOUS sealed.
func NewSealer(cfg *config.Config) (*pii.Sealer, error) {
	return pii.New(cfg.DataKey, cfg.DataKeyPrevious...)
}
