package web

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/internal/identitytest"
	"github.com/flowd/flowd/internal/oidclogin"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/modules/webhooks"
)

// newServer builds the server of a test from d's collaborators and, for each
// one d leaves out, the real module as flowd serve builds it: on d.Pool (a
// fresh database when d has none) and d.Config (the defaults when d has
// none, with random keys where the defaults have none). The test's own
// organizations come from defaultSettings, and their names and audit log
// from testOrganizations.
func newServer(t testing.TB, d Deps) *Server {
	t.Helper()
	if d.Log == nil {
		d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
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
		cfg.SessionKey = testKey(t)
	}
	if len(cfg.DataKey) == 0 {
		cfg.DataKey = testKey(t)
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
		ident = identitytest.New(t, d.Pool, identitytest.Config{Issuer: base, Audience: cfg.Audience, KeyEncryptionKey: testKey(t),
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
	hooks, err := webhooks.New(d.Pool, flows.NewTaskReports(d.Pool), webhooks.Options{KeyEncryptionKey: testKey(t),
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
	definitions := consent.NewDefinitions(d.Pool, testOrganizations{})
	if d.Definitions == nil {
		d.Definitions = definitions
	}
	receipts := consent.NewReceipts(d.Pool, ident, testOrganizations{}, base)
	if d.Receipts == nil {
		d.Receipts = receipts
	}
	flowsModule := flows.New(d.Pool, sealer, requests, definitions, fakeOrgs{settings: defaultSettings}, hooks, d.Log,
		prometheus.NewRegistry(), flows.Config{NationalIDFormat: flows.FormatGeneric, ConsentTTL: cfg.ConsentTTL})
	if d.Flows == nil {
		d.Flows = flowsModule
	}
	if d.Consent == nil {
		d.Consent = consent.NewJourney(d.Pool, requests, flowsModule, definitions, receipts, testOrganizations{}, testOrganizations{}, consent.DefaultACRMap, d.Log)
	}
	if d.Withdrawals == nil {
		d.Withdrawals = consent.NewWithdrawals(d.Pool, requests, flowsModule, definitions, receipts)
	}
	if d.Login == nil {
		accounts, err := staff.NewAccounts(d.Pool, testOrganizations{}, staff.Config{PasswordParams: secrethash.Cheap})
		if err != nil {
			t.Fatal(err)
		}
		d.Login, err = login.New(d.Pool, ident, accounts, login.Config{Issuer: base, Clients: login.BuiltInClients(base, cfg.SessionKey),
			TestEID: cfg.TestEID, TestEIDLevels: TestEIDLevels(cfg.ConsentACRMap), NationalIDClaim: cfg.ConsentNationalIDClaim,
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
	if d.ConsoleRP == nil {
		d.ConsoleRP = oidclogin.New(oidclogin.ConsoleConfig(cfg))
	}
	if d.ConsentRP == nil {
		d.ConsentRP = oidclogin.New(oidclogin.ConsentConfig(cfg))
	}
	if d.Idempotency == nil {
		d.Idempotency = idempotency.New(d.Pool, sealer, d.Log, 0)
	}
	srv, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func testKey(t testing.TB) []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// testOrganizations answers what the consent journey and staff accounts ask
// of the organizations behind the test's flows and staff: every one exists,
// is called Test Bank, and keeps no audit log.
type testOrganizations struct{}

func (testOrganizations) OrganizationName(context.Context, string) (string, error) {
	return "Test Bank", nil
}

func (testOrganizations) OrganizationExists(context.Context, string) (bool, error) { return true, nil }

func (testOrganizations) RecordIdentityMismatchTx(context.Context, database.Tx, string, string, string) error {
	return nil
}

// TestNewRefusesAMissingCollaborator: the server is built whole or not at all.
func TestNewRefusesAMissingCollaborator(t *testing.T) {
	t.Parallel()
	complete := newServer(t, Deps{})
	d := Deps{Log: complete.log, Config: complete.cfg, Pool: complete.pool, Registry: prometheus.NewRegistry(),
		Tokens: complete.tokens, Bearer: complete.bearer, JWKS: complete.jwks, Organizations: complete.orgs, Clients: complete.clients,
		Audit: complete.audit, Limits: complete.limits, Flows: complete.flows, Webhooks: complete.webhooks, Endpoints: complete.endpoints, Consent: complete.consent,
		Withdrawals: complete.withdrawals, Definitions: complete.definitions, Receipts: complete.receipts, Login: complete.login, ConsoleRP: complete.consoleRP, ConsentRP: complete.consentRP,
		Sessions: complete.sessions, Idempotency: complete.answers}
	if _, err := New(d); err != nil {
		t.Fatalf("every collaborator given: %v", err)
	}
	for name, drop := range map[string]func(*Deps){
		"Tokens":        func(d *Deps) { d.Tokens = nil },
		"Bearer":        func(d *Deps) { d.Bearer = nil },
		"JWKS":          func(d *Deps) { d.JWKS = nil },
		"Organizations": func(d *Deps) { d.Organizations = nil },
		"Clients":       func(d *Deps) { d.Clients = nil },
		"Audit":         func(d *Deps) { d.Audit = nil },
		"Limits":        func(d *Deps) { d.Limits = nil },
		"Flows":         func(d *Deps) { d.Flows = nil },
		"Endpoints":     func(d *Deps) { d.Endpoints = nil },
		"Consent":       func(d *Deps) { d.Consent = nil },
		"Withdrawals":   func(d *Deps) { d.Withdrawals = nil },
		"Definitions":   func(d *Deps) { d.Definitions = nil },
		"Receipts":      func(d *Deps) { d.Receipts = nil },
		"Login":         func(d *Deps) { d.Login = nil },
		"Sessions":      func(d *Deps) { d.Sessions = nil },
		"Pool":          func(d *Deps) { d.Pool = nil },
		"Idempotency":   func(d *Deps) { d.Idempotency = nil },
	} {
		without := d
		drop(&without)
		if _, err := New(without); err == nil || err.Error() != "web: New needs "+name {
			t.Errorf("without %s: %v", name, err)
		}
	}
}
