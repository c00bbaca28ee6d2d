// Package webtest builds the real server, with every route of
// web/routes.go, for the tests of each surface of web: the real modules on
// a fresh database, but where a test gives a collaborator of its own.
package webtest

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testlog"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/taskreports"
	"github.com/flowd/flowd/modules/identity/identitytest"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web"
)

// Server is the real server of a test and the collaborators it was built
// from.
type Server struct {
	*web.Server
	// Deps are what New was given: the test's own collaborators and, for
	// each one it left out, the real module.
	Deps web.Deps
}

// NewServer builds the server of a test from d's collaborators and, for each
// one d leaves out, the real module as flowd serve builds it: on d.Pool (a
// fresh database when d has none) and d.Config (the defaults when d has
// none, with random keys where the defaults have none). The test's own
// organizations come from DefaultSettings, and their names and audit log
// from TestOrganizations.
func NewServer(t testing.TB, d web.Deps) *Server {
	t.Helper()
	if d.Log == nil {
		d.Log = testlog.New(t)
	}
	if d.Config == nil {
		cfg, err := config.Load(func(string) string { return "" }, config.Need{})
		if err != nil {
			t.Fatal(err)
		}
		d.Config = cfg
	}
	cfg := d.Config
	if len(cfg.SessionKey) == 0 {
		cfg.SessionKey = RandomKey(t)
	}
	if len(cfg.DataKey) == 0 {
		cfg.DataKey = RandomKey(t)
	}
	if d.Pool == nil {
		d.Pool = dbtest.New(t)
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	base := cfg.BaseURL.String()
	// The login provider signs with the real identity module's parts, also
	// when the test fakes the bearer verification the API asks of Bearer;
	// a test that gives its own parts gives them as Tokens.
	ident, _ := d.Tokens.(*identitytest.Identity)
	if ident == nil {
		ident = identitytest.New(t, d.Pool, identitytest.Config{Issuer: base, Audience: cfg.Audience, KeyEncryptionKey: RandomKey(t),
			Log: d.Log, APIRateLimit: cfg.APIRateLimit})
	}
	if d.Tokens == nil {
		d.Tokens = ident
	}
	if d.Bearer == nil {
		d.Bearer = ident
	}
	if d.JWKS == nil {
		d.JWKS = ident
	}
	if d.Organizations == nil {
		d.Organizations = ident
	}
	if d.Clients == nil {
		d.Clients = ident
	}
	if d.Audit == nil {
		d.Audit = ident
	}
	if d.Limits == nil {
		d.Limits = ident
	}
	hooks, err := webhooks.New(d.Pool, taskreports.New(d.Pool), webhooks.Options{KeyEncryptionKey: RandomKey(t),
		Log: d.Log, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if d.Webhooks == nil {
		d.Webhooks = hooks
	}
	if d.Endpoints == nil {
		d.Endpoints = webhooks.NewEndpoints(d.Pool, webhooks.EndpointRules{AllowInsecureURLs: cfg.AllowInsecureURLs,
			AllowPrivate: cfg.WebhookAllowPrivate})
	}
	sealer, err := pii.New(cfg.DataKey)
	if err != nil {
		t.Fatal(err)
	}
	requests := consent.NewRequests(d.Pool, sealer, base)
	definitions := consent.NewDefinitions(d.Pool, TestOrganizations{})
	if d.Definitions == nil {
		d.Definitions = definitions
	}
	if d.Resources == nil {
		d.Resources = consent.NewResources(d.Pool)
	}
	receiptService := receipts.New(d.Pool, ident, TestOrganizations{}, base)
	if d.Receipts == nil {
		d.Receipts = receiptService
	}
	flowsModule := flows.New(d.Pool, sealer, requests, definitions, FakeOrgs{Settings: DefaultSettings}, hooks, d.Log,
		prometheus.NewRegistry(), flows.Config{ConsentTTL: cfg.ConsentTTL,
			PersonIndex: nationalid.NewBlindIndex(cfg.KeyEncryptionKey, nationalid.Format{})})
	if d.Flows == nil {
		d.Flows = flowsModule
	}
	journey := consent.NewJourney(d.Pool, requests, flowsModule, definitions, receiptService, TestOrganizations{}, TestOrganizations{}, assurance.DefaultACRMap, d.Log)
	if d.Records == nil {
		m, _ := d.Flows.(*flows.Manager)
		if m == nil {
			m = flowsModule
		}
		d.Records = consent.NewRecords(m, definitions, d.Resources, TestOrganizations{}, receiptService, base)
	}
	if d.Consent == nil {
		d.Consent = journey
	}
	if d.PersonPage == nil {
		d.PersonPage = journey
	}
	if d.Withdrawals == nil {
		d.Withdrawals = consent.NewWithdrawals(d.Pool, requests, flowsModule, definitions, receiptService)
	}
	if d.SSF == nil {
		transmitter, err := ssf.New(d.Pool, ident, definitions, sealer, ssf.Options{Issuer: base, AllowInsecure: cfg.AllowInsecureURLs,
			AllowPrivate: cfg.WebhookAllowPrivate, Log: d.Log})
		if err != nil {
			t.Fatal(err)
		}
		d.SSF = transmitter
		if d.Notices == nil {
			d.Notices = transmitter
		}
	}
	if d.Login == nil {
		accounts, err := staff.NewAccounts(d.Pool, TestOrganizations{}, staff.Config{PasswordParams: secrethash.Cheap})
		if err != nil {
			t.Fatal(err)
		}
		d.Login, err = login.New(d.Pool, ident, accounts, login.Config{Issuer: base, Clients: login.BuiltInClients(base, cfg.SessionKey),
			TestEID: cfg.TestEID, TestEIDLevels: web.TestEIDLevels(cfg.ConsentACRMap), NationalIDClaim: cfg.ConsentNationalIDClaim,
			DataKey: cfg.DataKey})
		if err != nil {
			t.Fatal(err)
		}
	}
	if d.Sessions == nil {
		sessions, err := staff.NewSessions(d.Pool, staff.SessionsConfig{Log: d.Log, Now: d.Now})
		if err != nil {
			t.Fatal(err)
		}
		d.Sessions = sessions
	}
	if d.Idempotency == nil {
		d.Idempotency = idempotency.New(d.Pool, sealer, d.Log, 0)
	}
	if d.Erasures == nil {
		m, _ := d.Flows.(*flows.Manager)
		if m == nil {
			m = flowsModule
		}
		publisher, _ := d.Webhooks.(*webhooks.Module)
		if publisher == nil {
			publisher = hooks
		}
		d.Erasures = erasure.New(erasure.Deps{Pool: d.Pool, Flows: m, Keys: m, Subjects: receiptService, Answers: d.Idempotency,
			Events: publisher, Audit: d.Audit, Signer: ident, Orgs: TestOrganizations{}, KeyEncryptionKey: cfg.KeyEncryptionKey,
			Issuer: base})
	}
	srv, err := web.New(d)
	if err != nil {
		t.Fatal(err)
	}
	return &Server{Server: srv, Deps: d}
}

// RandomKey is a random 32-byte key.
func RandomKey(t testing.TB) []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestOrganizations answers what the consent journey and staff accounts ask
// of the organizations behind the test's flows and staff: every one exists,
// is called Test Bank, and keeps no audit log.
type TestOrganizations struct{}

func (TestOrganizations) OrganizationName(context.Context, string) (string, error) {
	return "Test Bank", nil
}

func (TestOrganizations) OrganizationExists(context.Context, string) (bool, error) { return true, nil }

func (TestOrganizations) RecordIdentityMismatchTx(context.Context, database.Tx, string, string, string) error {
	return nil
}

func (TestOrganizations) RecordPersonPageTx(context.Context, database.Tx, string, string, []string) error {
	return nil
}

func (TestOrganizations) QueuePersonPage(*database.Batch, string, []consent.PersonPageRecord, time.Duration) error {
	return nil
}
