package webtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/internal/testkit/testlog"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity/identitytest"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web"
)

// LoginServer is a real server with the built-in provider and both relying
// parties, on a fresh database, listening on its base URL.
type LoginServer struct {
	URL      string
	Srv      *Server
	Cfg      *config.Config
	Staff    *staff.AccountService
	Sessions *staff.SessionStore
	Pool     *pgxpool.Pool
	Ident    *identitytest.Identity
	Flows    *flows.Manager
}

// LoginOptions vary a LoginServer.
type LoginOptions struct {
	Env          map[string]string // settings, as FLOWD_* variables
	ExtraClients func(base string) []login.Client
	OrgClaim     string // the provider's claim names
	RolesClaim   string
	ConsoleHTTP  *http.Client // the console relying party's client to the provider
	// Preset gives the listener before the server is built, so that two
	// servers may name each other.
	Preset *httptest.Server
	// Now is the sessions' clock; time.Now when nil.
	Now func() time.Time
	// IdentityNow is the identity parts' clock (tokens, rate limit
	// windows); time.Now when nil.
	IdentityNow func() time.Time
}

// NewListener is a listener whose address is known before the server is.
func NewListener() *httptest.Server { return httptest.NewUnstartedServer(nil) }

// BaseOf is the base URL of a server listening on hs.
func BaseOf(hs *httptest.Server) string { return "http://" + hs.Listener.Addr().String() }

// SetupLogin starts a LoginServer.
func SetupLogin(t *testing.T, o LoginOptions) LoginServer {
	t.Helper()
	hs := o.Preset
	if hs == nil {
		hs = NewListener()
	}
	base := BaseOf(hs)
	env := map[string]string{"FLOWD_BASE_URL": base, "FLOWD_TEST_EID": "true"}
	for k, v := range o.Env {
		env[k] = v
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, config.Need{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.SessionKey, cfg.DataKey = RandomKey(t), RandomKey(t)
	pool := dbtest.New(t)
	// The identity module signs ID tokens and serves the token endpoint,
	// JWKS and discovery, as in flowd serve.
	ident := identitytest.New(t, pool, identitytest.Config{Issuer: base, Audience: cfg.Audience, KeyEncryptionKey: RandomKey(t),
		Log: testlog.New(t), APIRateLimit: cfg.APIRateLimit, Now: o.IdentityNow})
	accounts, err := staff.NewAccounts(pool, TestOrganizations{}, staff.Config{PasswordParams: secrethash.Cheap, AccountLimit: 3, AddressLimit: 5})
	if err != nil {
		t.Fatal(err)
	}
	clients := login.BuiltInClients(base, cfg.SessionKey)
	if o.ExtraClients != nil {
		clients = append(clients, o.ExtraClients(base)...)
	}
	provider, err := login.New(pool, ident, accounts, login.Config{Issuer: base, Clients: clients, TestEID: cfg.TestEID,
		TestEIDLevels:   web.TestEIDLevels(cfg.ConsentACRMap),
		NationalIDClaim: cfg.ConsentNationalIDClaim, OrgClaim: o.OrgClaim, RolesClaim: o.RolesClaim, DataKey: cfg.DataKey})
	if err != nil {
		t.Fatal(err)
	}
	// The console's pages list flows: the real flows module, with the test
	// organizations' settings.
	sealer, err := pii.New(RandomKey(t))
	if err != nil {
		t.Fatal(err)
	}
	definitions := consent.NewDefinitions(pool, TestOrganizations{})
	receiptService := receipts.New(pool, ident, TestOrganizations{}, base)
	flowsModule := flows.New(pool, sealer, consent.NewRequests(pool, sealer, base), definitions,
		FakeOrgs{Settings: DefaultSettings}, &TableEvents{},
		testlog.New(t), prometheus.NewRegistry(), flows.Config{})
	sessions, err := staff.NewSessions(pool, staff.SessionsConfig{Log: testlog.New(t), Now: o.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(t, web.Deps{Config: cfg, Pool: pool, Tokens: ident, Flows: flowsModule, Receipts: receiptService, Login: provider,
		ConsoleHTTP: o.ConsoleHTTP, Sessions: sessions, Now: o.Now})
	hs.Config.Handler = srv
	hs.Start()
	t.Cleanup(hs.Close)
	return LoginServer{URL: base, Srv: srv, Cfg: cfg, Staff: accounts, Sessions: sessions, Pool: pool, Ident: ident, Flows: flowsModule}
}

// TestPassword is the password of the staff accounts tests create.
const TestPassword = "correct horse battery staple"

// CreateStaff creates a staff account of org with TestPassword.
func (ls LoginServer) CreateStaff(t *testing.T, org, username string, role staff.Role) staff.Account {
	t.Helper()
	a, err := ls.Staff.CreateStaff(context.Background(), staff.NewAccount{OrganizationID: org, Username: username,
		Name: "Person " + username, Role: role, Password: TestPassword})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// StaffPair is an organization with an admin and a viewer signed in to the
// console, and a second organization to show that nothing crosses over.
type StaffPair struct {
	Org, Other            orgs.Organization
	Admin, Viewer         *formbrowser.Browser
	AdminCSRF, ViewerCSRF string
}

// SignInStaffPair creates the organizations of a StaffPair, its admin "ada"
// and viewer "vic", and signs both in.
func (ls LoginServer) SignInStaffPair(t *testing.T, name, prefix string) StaffPair {
	t.Helper()
	ctx := context.Background()
	var s StaffPair
	var err error
	if s.Org, err = ls.Ident.CreateOrganization(ctx, orgs.NewOrganization{Name: name, ReferencePrefix: prefix}); err != nil {
		t.Fatal(err)
	}
	if s.Other, err = ls.Ident.CreateOrganization(ctx, orgs.NewOrganization{Name: "Other Bank", ReferencePrefix: "OTH"}); err != nil {
		t.Fatal(err)
	}
	ls.CreateStaff(t, s.Org.ID, "ada", staff.RoleAdmin)
	ls.CreateStaff(t, s.Org.ID, "vic", staff.RoleViewer)
	s.Admin, s.Viewer = formbrowser.New(t), formbrowser.New(t)
	s.AdminCSRF = SignInStaff(t, s.Admin, ls.URL, "ada", TestPassword).HiddenFields(t).Get("csrf")
	s.ViewerCSRF = SignInStaff(t, s.Viewer, ls.URL, "vic", TestPassword).HiddenFields(t).Get("csrf")
	return s
}

// SignInStaff drives a console sign-in through the staff form and returns the
// page the browser lands on.
func SignInStaff(t *testing.T, b *formbrowser.Browser, base, username, password string) formbrowser.Page {
	t.Helper()
	form := b.Follow(http.MethodGet, base+"/console", nil)
	if !strings.Contains(form.Body, `name="password"`) {
		t.Fatalf("no staff sign-in form: %d %s", form.Status, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("username", username)
	v.Set("password", password)
	return b.Follow(http.MethodPost, base+"/idp/login", v)
}

// MustQuery is the query of URL u.
func MustQuery(t *testing.T, u string) url.Values {
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return parsed.Query()
}

// CopyCookies returns a fresh browser holding copies of from's cookies
// named names, as someone who copied them out of the browser would.
func CopyCookies(t *testing.T, from *formbrowser.Browser, base string, names ...string) *formbrowser.Browser {
	t.Helper()
	u, _ := url.Parse(base)
	var copied []*http.Cookie
	for _, c := range from.Jar().Cookies(u) {
		if slices.Contains(names, c.Name) {
			copied = append(copied, &http.Cookie{Name: c.Name, Value: c.Value, Path: "/"})
		}
	}
	if len(copied) != len(names) {
		t.Fatalf("the browser holds %d of the cookies %v", len(copied), names)
	}
	to := formbrowser.New(t)
	to.Jar().SetCookies(u, copied)
	return to
}
