package web

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/identitytest"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/tokens"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

// Test organizations and the bearer tokens fakeIdentity knows.
const (
	orgA = "org-a"
	orgB = "org-b"

	tokA        = "token-a-all"
	tokARead    = "token-a-read"
	tokAWrite   = "token-a-write"
	tokADelete  = "token-a-delete"
	tokASandbox = "token-a-sandbox"
	tokB        = "token-b-all"
)

var testPrincipals = map[string]identity.Principal{
	tokA:        {OrganizationID: orgA, ClientID: "client-a", Scopes: identity.AllScopes},
	tokARead:    {OrganizationID: orgA, ClientID: "client-a-read", Scopes: []string{identity.ScopeFlowsRead}},
	tokAWrite:   {OrganizationID: orgA, ClientID: "client-a-write", Scopes: []string{identity.ScopeFlowsWrite}},
	tokADelete:  {OrganizationID: orgA, ClientID: "client-a-delete", Scopes: []string{identity.ScopeFlowsDelete}},
	tokASandbox: {OrganizationID: orgA, ClientID: "client-a-sandbox", Scopes: identity.AllScopes, Sandbox: true},
	tokB:        {OrganizationID: orgB, ClientID: "client-b", Scopes: identity.AllScopes},
}

// fakeIdentity maps test token strings to principals and keeps the audit
// log in test_events. The API tests need only bearer verification and the
// audit log; the rest of identity is the real module's, tested in
// oauth_test.go and end to end.
type fakeIdentity struct {
	tokens.Verifier
	audit.Log
}

func (fakeIdentity) VerifyAccessToken(_ context.Context, raw string) (identity.Principal, error) {
	if p, ok := testPrincipals[raw]; ok {
		return p, nil
	}
	return identity.Principal{}, apperr.New(apperr.Unauthenticated, "invalid token")
}

// fakeOrgs gives each organization its flow settings.
type fakeOrgs struct {
	settings func(organizationID string) flows.OrganizationSettings
}

func (o fakeOrgs) FlowSettings(_ context.Context, organizationID string) (flows.OrganizationSettings, error) {
	return o.settings(organizationID), nil
}

func defaultSettings(organizationID string) flows.OrganizationSettings {
	switch organizationID {
	case orgA:
		return flows.OrganizationSettings{ReferencePrefix: "ACME", OrganizationNumber: "987654321"}
	case orgB:
		return flows.OrganizationSettings{ReferencePrefix: "BETA", RedirectOrigins: []string{"https://beta.example"}}
	}
	return flows.OrganizationSettings{ReferencePrefix: "T"}
}

// tableEvents is a webhooks.Publisher that writes each call into the table
// test_events through the transaction it is given, so that a test sees
// exactly the events of committed changes. publish, when set, runs first and
// may fail the call.
type tableEvents struct {
	publish func(ctx context.Context, ev webhooks.Event) error
}

func (e *tableEvents) PublishTx(ctx context.Context, tx database.Tx, ev webhooks.Event) error {
	if _, err := tx.Exec(ctx, `insert into test_events (kind, flow_id, task_id, reference_id, organization_id, status, flow_status, version, url)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, string(ev.Type), ev.FlowID, ev.TaskID, ev.ReferenceID,
		ev.OrganizationID, ev.Status, ev.FlowStatus, ev.Version, ev.URL); err != nil {
		return err
	}
	if e.publish != nil {
		return e.publish(ctx, ev)
	}
	return nil
}

func (e *tableEvents) CancelPendingTx(ctx context.Context, tx database.Tx, _, flowID string) error {
	_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id) values ('cancel-pending', $1)`, flowID)
	return err
}

// RecordAuditTx keeps the API's audit entries in test_events, in the
// caller's transaction: kind "audit", the action as status, the actor as
// task_id, the target as reference_id, the detail as url.
func (fakeIdentity) RecordAuditTx(ctx context.Context, tx database.Tx, e identity.AuditEntry) error {
	_, err := tx.Exec(ctx, `insert into test_events (kind, flow_id, status, task_id, reference_id, organization_id, url)
		values ('audit', '', $1, $2, $3, $4, $5)`, e.Action, e.Actor, e.Target, e.OrganizationID, e.Detail)
	return err
}

// createTestEvents makes the table tableEvents writes to.
func createTestEvents(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `create table test_events (id bigserial primary key, kind text not null,
		flow_id text not null, task_id text not null default '', reference_id text not null default '',
		organization_id text not null default '', status text not null default '', flow_status text not null default '',
		version int not null default 0, url text not null default '')`); err != nil {
		t.Fatal(err)
	}
}

// apiEnv is the real server with the real flows and consent modules on a
// fresh database.
type apiEnv struct {
	url   string
	srv   *Server
	pool  *pgxpool.Pool
	flows *flows.Manager
	// journey decides the flows as their people would.
	journey *consent.JourneyService
	events  *tableEvents
	proxy   *dbtest.Proxy // cuts the database away
	// receiptKeys signs the flows' receipts; its JWKS is what /oauth/jwks serves.
	receiptKeys *identitytest.Identity
	// hooks is the webhooks module withWebhooks runs; nil without it.
	hooks *webhooks.Module
}

// apiSetup is what an envOption may change of the API's test environment.
type apiSetup struct {
	flows *flows.Config
	orgs  *fakeOrgs
	// webhooks publishes the flows' events through the real webhooks
	// module, running, instead of into test_events.
	webhooks bool
}

type envOption func(*apiSetup)

func withNationalIDFormat(f string) envOption {
	return func(s *apiSetup) { s.flows.NationalIDFormat = f }
}

// withWebhooks publishes the flows' events through the real webhooks
// module, whose workers deliver them (to private addresses too).
func withWebhooks() envOption {
	return func(s *apiSetup) { s.webhooks = true }
}

func newAPI(t testing.TB, opts ...envOption) *apiEnv {
	t.Helper()
	proxy, dbURL := dbtest.NewProxy(t, dbtest.NewURL(t))
	pool, err := database.Open(context.Background(), dbURL, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	createTestEvents(t, pool)
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
	fcfg := flows.Config{NationalIDFormat: flows.FormatGeneric, ConsentTTL: cfg.ConsentTTL}
	orgs := fakeOrgs{settings: defaultSettings}
	setup := apiSetup{flows: &fcfg, orgs: &orgs}
	for _, o := range opts {
		o(&setup)
	}
	events := &tableEvents{}
	var publisher flows.Events = events
	var hooks *webhooks.Module
	if setup.webhooks {
		if hooks, err = webhooks.New(pool, flows.NewTaskReports(pool), webhooks.Options{KeyEncryptionKey: key, AllowPrivate: true,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()}); err != nil {
			t.Fatal(err)
		}
		publisher = hooks
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- hooks.Run(ctx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	definitions := consent.NewDefinitions(pool, testOrganizations{})
	receiptKeys := identitytest.New(t, pool, identitytest.Config{Issuer: cfg.BaseURL.String(), KeyEncryptionKey: key})
	receipts := consent.NewReceipts(pool, receiptKeys, testOrganizations{}, cfg.BaseURL.String())
	requests := consent.NewRequests(pool, sealer, cfg.BaseURL.String())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := flows.New(pool, sealer, requests, definitions, orgs, publisher, log, prometheus.NewRegistry(), fcfg)
	journey := consent.NewJourney(pool, requests, m, definitions, receipts, testOrganizations{}, testOrganizations{}, consent.DefaultACRMap, log)
	d := Deps{Config: cfg, Pool: pool, Bearer: fakeIdentity{}, Audit: fakeIdentity{}, Flows: m, Receipts: receipts, Consent: journey,
		Withdrawals: consent.NewWithdrawals(pool, requests, m, definitions, receipts)}
	if hooks != nil {
		d.Webhooks = hooks
	}
	srv := newServer(t, d)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &apiEnv{url: hs.URL, srv: srv, pool: pool, flows: m, journey: journey, events: events, proxy: proxy, receiptKeys: receiptKeys, hooks: hooks}
}

// response is what call returns.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// fields returns the field names of a problem body's errors.
func (r response) fields(t testing.TB) []string {
	t.Helper()
	var p Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("not a problem: %s", r.body)
	}
	var out []string
	for _, e := range p.Errors {
		out = append(out, e.Field)
	}
	return out
}

// call makes one API request; headers come in name, value pairs.
func (e *apiEnv) call(t testing.TB, method, path, token, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
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
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// createBody is a valid create request body with optional overrides.
func createBody(overrides map[string]any) string {
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

// create makes a flow through the API and returns its id.
func (e *apiEnv) create(t testing.TB, token string, overrides map[string]any) string {
	t.Helper()
	r := e.call(t, "POST", "/api/flows", token, createBody(overrides))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	return r.json(t)["flowId"].(string)
}

// count returns the result of a count query.
func (e *apiEnv) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// keysOf returns the sorted keys of a JSON object.
func keysOf(m any) string {
	obj, _ := m.(map[string]any)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// parallel runs n calls of fn on workers goroutines.
func parallel(n, workers int, fn func(i int)) {
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
