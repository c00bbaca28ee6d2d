package webtest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testlog"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/taskreports"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/identitytest"
	"github.com/flowd/flowd/modules/identity/tokens"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

// Test organizations and the bearer tokens FakeIdentity knows.
const (
	OrgA = "org-a"
	OrgB = "org-b"

	TokA        = "token-a-all"
	TokARead    = "token-a-read"
	TokAWrite   = "token-a-write"
	TokADelete  = "token-a-delete"
	TokASandbox = "token-a-sandbox"
	TokB        = "token-b-all"
)

// TestPrincipals are the callers FakeIdentity admits, by token.
var TestPrincipals = map[string]identity.Principal{
	TokA:        {OrganizationID: OrgA, ClientID: "client-a", Scopes: identity.AllScopes},
	TokARead:    {OrganizationID: OrgA, ClientID: "client-a-read", Scopes: []string{identity.ScopeFlowsRead}},
	TokAWrite:   {OrganizationID: OrgA, ClientID: "client-a-write", Scopes: []string{identity.ScopeFlowsWrite}},
	TokADelete:  {OrganizationID: OrgA, ClientID: "client-a-delete", Scopes: []string{identity.ScopeFlowsDelete}},
	TokASandbox: {OrganizationID: OrgA, ClientID: "client-a-sandbox", Scopes: identity.AllScopes, Sandbox: true},
	TokB:        {OrganizationID: OrgB, ClientID: "client-b", Scopes: identity.AllScopes},
}

// FakeIdentity maps test token strings to principals and keeps the audit
// log in test_events. The API tests need only bearer verification and the
// audit log; the rest of identity is the real module's, tested in
// web/oauth's tests and end to end.
type FakeIdentity struct {
	tokens.Verifier
	audit.Log
}

func (FakeIdentity) VerifyAccessToken(_ context.Context, raw string) (identity.Principal, error) {
	if p, ok := TestPrincipals[raw]; ok {
		return p, nil
	}
	return identity.Principal{}, apperr.New(apperr.Unauthenticated, "invalid token")
}

// FakeOrgs gives each organization its flow settings.
type FakeOrgs struct {
	Settings func(organizationID string) flows.OrganizationSettings
}

func (o FakeOrgs) FlowSettings(_ context.Context, organizationID string) (flows.OrganizationSettings, error) {
	return o.Settings(organizationID), nil
}

// DefaultSettings are the flow settings of the test organizations.
func DefaultSettings(organizationID string) flows.OrganizationSettings {
	switch organizationID {
	case OrgA:
		return flows.OrganizationSettings{ReferencePrefix: "ACME", OrganizationNumber: "987654321"}
	case OrgB:
		return flows.OrganizationSettings{ReferencePrefix: "BETA", RedirectOrigins: []string{"https://beta.example"}}
	}
	return flows.OrganizationSettings{ReferencePrefix: "T"}
}

// TableEvents is a webhooks.Publisher that writes each call into the table
// test_events through the transaction it is given, so that a test sees
// exactly the events of committed changes. publish, when set, runs first and
// may fail the call.
type TableEvents struct {
	Publish func(ctx context.Context, ev webhooks.Event) error
}

func (e *TableEvents) PublishTx(ctx context.Context, tx database.Tx, ev webhooks.Event) error {
	if _, err := tx.Exec(ctx, `insert into test_events (kind, flow_id, task_id, reference_id, organization_id, status, flow_status, version, url)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, string(ev.Type), ev.FlowID, ev.TaskID, ev.ReferenceID,
		ev.OrganizationID, ev.Status, ev.FlowStatus, ev.Version, ev.URL); err != nil {
		return err
	}
	if e.Publish != nil {
		return e.Publish(ctx, ev)
	}
	return nil
}

func (e *TableEvents) CancelPendingTx(ctx context.Context, tx database.Tx, _, flowID string) error {
	_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id) values ('cancel-pending', $1)`, flowID)
	return err
}

// RecordAuditTx keeps the API's audit entries in test_events, in the
// caller's transaction: kind "audit", the action as status, the actor as
// task_id, the target as reference_id, the detail as url.
func (FakeIdentity) RecordAuditTx(ctx context.Context, tx database.Tx, e identity.AuditEntry) error {
	_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id, status, task_id, reference_id, organization_id, url)
		values ('audit', '', $1, $2, $3, $4, $5)`, e.Action, e.Actor, e.Target, e.OrganizationID, e.Detail)
	return err
}

// CreateTestEvents makes the table TableEvents writes to.
func CreateTestEvents(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `create table test_events (id bigserial primary key, kind text not null,
		flow_id text not null, task_id text not null default '', reference_id text not null default '',
		organization_id text not null default '', status text not null default '', flow_status text not null default '',
		version int not null default 0, url text not null default '')`); err != nil {
		t.Fatal(err)
	}
}

// APIEnv is the real server with the real flows and consent modules on a
// fresh database.
type APIEnv struct {
	URL   string
	Srv   *Server
	Pool  *pgxpool.Pool
	Flows *flows.Manager
	// Journey decides the flows as their people would.
	Journey *consent.JourneyService
	Events  *TableEvents
	Proxy   *dbtest.Proxy // cuts the database away
	// ReceiptKeys signs the flows' receipts; its JWKS is what /oauth/jwks serves.
	ReceiptKeys *identitytest.Identity
	// Receipts signs and checks consent receipts as the server does.
	Receipts *receipts.Service
	// Hooks is the webhooks module WithWebhooks runs; nil without it.
	Hooks *webhooks.Module
	// Sealer seals personal data under the environment's data key.
	Sealer *pii.Sealer
}

// apiSetup is what an envOption may change of the API's test environment.
type apiSetup struct {
	flows *flows.Config
	orgs  *FakeOrgs
	// webhooks publishes the flows' events through the real webhooks
	// module, running, instead of into test_events.
	webhooks bool
	// retention has the flows kept as their definitions' retention says.
	retention bool
}

// EnvOption changes the API's test environment.
type EnvOption func(*apiSetup)

// WithNationalIDFormat holds national ids to format f.
func WithNationalIDFormat(f string) EnvOption {
	return func(s *apiSetup) { s.flows.NationalIDs = nationalid.MustNew(f, nil) }
}

// WithWebhooks publishes the flows' events through the real webhooks
// module, whose workers deliver them (to private addresses too).
func WithWebhooks() EnvOption {
	return func(s *apiSetup) { s.webhooks = true }
}

// WithRetention keeps completed flows as their definitions' retention
// says (flows.Manager.EraseRetained).
func WithRetention() EnvOption {
	return func(s *apiSetup) { s.retention = true }
}

// NewAPI starts the API's test environment on a fresh database.
func NewAPI(t testing.TB, opts ...EnvOption) *APIEnv {
	t.Helper()
	proxy, dbURL := dbtest.NewProxy(t, dbtest.NewURL(t))
	pool, err := database.Open(context.Background(), dbURL, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	CreateTestEvents(t, pool)
	cfg, err := config.Load(func(k string) string {
		if k == "FLOWD_BASE_URL" {
			return "https://flowd.example"
		}
		return ""
	}, config.Need{})
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	sealer, err := pii.New(key)
	if err != nil {
		t.Fatal(err)
	}
	fcfg := flows.Config{ConsentTTL: cfg.ConsentTTL}
	orgs := FakeOrgs{Settings: DefaultSettings}
	setup := apiSetup{flows: &fcfg, orgs: &orgs}
	for _, o := range opts {
		o(&setup)
	}
	events := &TableEvents{}
	var publisher flows.Events = events
	var hooks *webhooks.Module
	if setup.webhooks {
		if hooks, err = webhooks.New(pool, taskreports.New(pool), webhooks.Options{KeyEncryptionKey: key, AllowPrivate: true,
			Log: testlog.New(t), Registry: prometheus.NewRegistry()}); err != nil {
			t.Fatal(err)
		}
		publisher = hooks
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- hooks.Run(ctx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	definitions := consent.NewDefinitions(pool, TestOrganizations{})
	if setup.retention {
		fcfg.Retention = definitions
	}
	receiptKeys := identitytest.New(t, pool, identitytest.Config{Issuer: cfg.BaseURL.String(), KeyEncryptionKey: key})
	receiptService := receipts.New(pool, receiptKeys, TestOrganizations{}, cfg.BaseURL.String())
	requests := consent.NewRequests(pool, sealer, cfg.BaseURL.String())
	log := testlog.New(t)
	m := flows.New(pool, sealer, requests, definitions, orgs, publisher, log, prometheus.NewRegistry(), fcfg)
	journey := consent.NewJourney(pool, requests, m, definitions, receiptService, TestOrganizations{}, TestOrganizations{}, assurance.DefaultACRMap, log)
	d := web.Deps{Config: cfg, Pool: pool, Bearer: FakeIdentity{}, Audit: FakeIdentity{}, Flows: m, Receipts: receiptService, Consent: journey,
		Withdrawals: consent.NewWithdrawals(pool, requests, m, definitions, receiptService)}
	if hooks != nil {
		d.Webhooks = hooks
	}
	erasureEvents := hooks
	if erasureEvents == nil {
		if erasureEvents, err = webhooks.New(pool, taskreports.New(pool), webhooks.Options{KeyEncryptionKey: key,
			Log: log, Registry: prometheus.NewRegistry()}); err != nil {
			t.Fatal(err)
		}
	}
	d.Idempotency = idempotency.New(pool, sealer, log, 0)
	d.Erasures = erasure.New(erasure.Deps{Pool: pool, Flows: m, Keys: m, Subjects: receiptService, Answers: d.Idempotency, Events: erasureEvents,
		Audit: FakeIdentity{}, Signer: receiptKeys, Orgs: TestOrganizations{}, KeyEncryptionKey: key, Issuer: cfg.BaseURL.String()})
	srv := NewServer(t, d)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &APIEnv{URL: hs.URL, Srv: srv, Pool: pool, Flows: m, Journey: journey, Events: events, Proxy: proxy, ReceiptKeys: receiptKeys,
		Receipts: receiptService, Hooks: hooks, Sealer: sealer}
}

// Response is what Call returns.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON is the body, a JSON object.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.Body)
	}
	return m
}

// Fields returns the field names of a problem body's errors.
func (r Response) Fields(t testing.TB) []string {
	t.Helper()
	var p httpkit.Problem
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("not a problem: %s", r.Body)
	}
	var out []string
	for _, e := range p.Errors {
		out = append(out, e.Field)
	}
	return out
}

// Call makes one API request; headers come in name, value pairs.
func (e *APIEnv) Call(t testing.TB, method, path, token, body string, headers ...string) Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// Every response of the API tests must match the OpenAPI document.
	openapitest.Validate(t, req, nil, resp, b)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// CreateBody is a valid create request body with optional overrides.
func CreateBody(overrides map[string]any) string {
	m := map[string]any{"nationalId": "ID-12345", "lastName": "Nordmann", "redirectUrl": "https://bank.example/done"}
	for k, v := range overrides {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// Create makes a flow through the API and returns its id.
func (e *APIEnv) Create(t testing.TB, token string, overrides map[string]any) string {
	t.Helper()
	r := e.Call(t, "POST", "/api/flows", token, CreateBody(overrides))
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["flowId"].(string)
}

// Count returns the result of a count query.
func (e *APIEnv) Count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// KeysOf returns the sorted keys of a JSON object.
func KeysOf(m any) string {
	obj, _ := m.(map[string]any)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// Parallel runs n calls of fn on workers goroutines.
func Parallel(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
