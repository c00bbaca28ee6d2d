package tokens

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/orgs"
)

const testIssuer = "https://flowd.test"

// clock is a settable clock for a test's instances: real time moved on by
// advance, or, once stopped, a time that moves only by advance.
type clock struct {
	mu      sync.Mutex
	off     time.Duration
	stopped time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped.IsZero() {
		return c.stopped.Add(c.off)
	}
	return time.Now().Add(c.off)
}

// stop makes the clock stand still, so that how long the test takes does
// not move what it checks across a window's edge.
func (c *clock) stop() {
	c.mu.Lock()
	c.stopped = time.Now()
	c.mu.Unlock()
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// testConfig is an instance's settings: the token service's, and the API
// rate limit of the instance's Limits.
type testConfig struct {
	Config
	APIRateLimit int
}

// The parts' services, by names an instance can embed them under.
type (
	orgService = orgs.Service
	keyService = keys.Service
)

// instance is one flowd instance's identity parts on a database, wired as
// serve wires them. The token service's methods are its own; the other
// parts' are promoted, so that a test reads as a caller of identity would.
type instance struct {
	*Service
	*orgService
	*keyService
	*audit.Store
	feed   *changes.Feed
	limits *orgs.Limits
	pool   *pgxpool.Pool
	cfg    testConfig
}

// AdmitAPIRequest is the instance's Limits'.
func (m *instance) AdmitAPIRequest(p identity.Principal) orgs.RateLimitStatus {
	return m.limits.AdmitAPIRequest(p)
}

// newInstance wires the parts of an instance on pool.
func newInstance(t testing.TB, pool *pgxpool.Pool, cfg testConfig) *instance {
	t.Helper()
	feed := changes.NewFeed(pool, nil)
	ks, err := keys.New(pool, feed, keys.Config{KeyEncryptionKey: cfg.KeyEncryptionKey, AccessTokenTTL: cfg.AccessTTL, Now: cfg.Now})
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	os, err := orgs.New(pool, feed, Grants{}, orgs.Config{KeyEncryptionKey: cfg.KeyEncryptionKey, HashParams: secrethash.Cheap,
		ClientJWKSHosts: cfg.ClientJWKSHosts})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := New(pool, feed, os, ks, log, cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &instance{Service: ts, orgService: os, keyService: ks, Store: log, feed: feed,
		limits: orgs.NewLimits(pool, orgs.LimitsConfig{PerMinute: cfg.APIRateLimit, Now: cfg.Now}), pool: pool, cfg: cfg}
}

// run runs the instance's change feed, as serve does, until the test ends.
func (m *instance) run(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.feed.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// fixture is what each test of this package starts from: an instance on a
// fresh database with one organization and one client.
type fixture struct {
	m      *instance
	clock  *clock
	org    orgs.Organization
	client orgs.ClientCredentials
}

func newFixture(t testing.TB, change func(*testConfig)) fixture {
	t.Helper()
	pool := dbtest.New(t)
	clk := &clock{}
	kek := make([]byte, 32)
	_, _ = rand.Read(kek)
	cfg := testConfig{Config: Config{Issuer: testIssuer, Audience: "flowd", KeyEncryptionKey: kek, Now: clk.now}}
	if change != nil {
		change(&cfg)
	}
	m := newInstance(t, pool, cfg)
	ctx := context.Background()
	org, err := m.CreateOrganization(ctx, orgs.NewOrganization{Name: "Test Bank"})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := m.CreateClient(ctx, orgs.NewClient{OrganizationID: org.ID, Scopes: []string{identity.ScopeFlowsRead, identity.ScopeFlowsWrite}})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{m: m, clock: clk, org: org, client: cc}
}

// another is another instance on the fixture's database, its settings the
// fixture's changed by change (when not nil).
func (f fixture) another(t testing.TB, change func(*testConfig)) *instance {
	t.Helper()
	cfg := f.m.cfg
	if change != nil {
		change(&cfg)
	}
	return newInstance(t, f.m.pool, cfg)
}

func (f fixture) token(t testing.TB) Token {
	t.Helper()
	tok, err := f.m.Token(context.Background(), TokenRequest{GrantType: GrantClientCredentials,
		ClientAuth: ClientAuth{ClientID: f.client.ID, ClientSecret: f.client.Secret, AuthMethod: identity.AuthSecretPost, RemoteAddr: "192.0.2.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// sign signs claims with the instance's active key, as a forger holding it would.
func (f fixture) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(claims)
	raw, err := f.m.SignAccessToken(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// accessKid returns the kid of the key that signs access tokens now.
func (f fixture) accessKid(t testing.TB) string {
	t.Helper()
	return kidOf(f.sign(t, f.claims()))
}

func (f fixture) claims() map[string]any {
	now := f.clock.now()
	return map[string]any{
		"iss": testIssuer, "sub": f.client.ID, "client_id": f.client.ID, "aud": "flowd",
		"exp": now.Add(5 * time.Minute).Unix(), "iat": now.Unix(), "jti": "x", "scope": "flows:read", "org_id": f.org.ID,
	}
}

func with(c map[string]any, k string, v any) map[string]any {
	c[k] = v
	return c
}

func assertInvalid(t *testing.T, m *instance, raw, why string) {
	t.Helper()
	_, err := m.VerifyAccessToken(context.Background(), raw)
	if err == nil {
		t.Fatalf("%s: token accepted", why)
	}
	if apperr.CodeOf(err) != apperr.Unauthenticated {
		t.Fatalf("%s: %v, want an unauthenticated error", why, err)
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited until the test's deadline for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
