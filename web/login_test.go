package web

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/oauth2"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/formbrowser"
	"github.com/flowd/flowd/internal/identitytest"
	"github.com/flowd/flowd/internal/oidclogin"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
)

// loginServer is a real server with the built-in provider and both relying
// parties, on a fresh database, listening on its base URL.
type loginServer struct {
	url      string
	srv      *Server
	cfg      *config.Config
	staff    *staff.AccountService
	sessions *staff.SessionStore
	pool     *pgxpool.Pool
	ident    *identitytest.Identity
	flows    *flows.Manager
}

// loginOptions vary a loginServer.
type loginOptions struct {
	env          map[string]string // settings, as FLOWD_* variables
	extraClients func(base string) []login.Client
	orgClaim     string // the provider's claim names
	rolesClaim   string
	consoleHTTP  *http.Client // the console relying party's client to the provider
	// preset gives the listener before the server is built, so that two
	// servers may name each other.
	preset *httptest.Server
	// now is the sessions' clock; time.Now when nil.
	now func() time.Time
}

func newListener() *httptest.Server { return httptest.NewUnstartedServer(nil) }

func baseOf(hs *httptest.Server) string { return "http://" + hs.Listener.Addr().String() }

func setupLogin(t *testing.T, o loginOptions) loginServer {
	t.Helper()
	hs := o.preset
	if hs == nil {
		hs = newListener()
	}
	base := baseOf(hs)
	env := map[string]string{"FLOWD_BASE_URL": base, "FLOWD_TEST_EID": "true"}
	for k, v := range o.env {
		env[k] = v
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, config.Need{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.SessionKey, cfg.DataKey = randomKey(t), randomKey(t)
	pool := dbtest.New(t)
	// The identity module signs ID tokens and serves the token endpoint,
	// JWKS and discovery, as in flowd serve.
	ident := identitytest.New(t, pool, identitytest.Config{Issuer: base, Audience: cfg.Audience, KeyEncryptionKey: randomKey(t),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), APIRateLimit: cfg.APIRateLimit})
	accounts, err := staff.NewAccounts(pool, testOrganizations{}, staff.Config{PasswordParams: secrethash.Cheap, AccountLimit: 3, AddressLimit: 5})
	if err != nil {
		t.Fatal(err)
	}
	clients := login.BuiltInClients(base, cfg.SessionKey)
	if o.extraClients != nil {
		clients = append(clients, o.extraClients(base)...)
	}
	provider, err := login.New(pool, ident, accounts, login.Config{Issuer: base, Clients: clients, TestEID: cfg.TestEID,
		TestEIDLevels:   TestEIDLevels(cfg.ConsentACRMap),
		NationalIDClaim: cfg.ConsentNationalIDClaim, OrgClaim: o.orgClaim, RolesClaim: o.rolesClaim, DataKey: cfg.DataKey})
	if err != nil {
		t.Fatal(err)
	}
	// The console's pages list flows: the real flows module, with the test
	// organizations' settings.
	sealer, err := pii.New(randomKey(t))
	if err != nil {
		t.Fatal(err)
	}
	definitions := consent.NewDefinitions(pool, testOrganizations{})
	receipts := consent.NewReceipts(pool, ident, testOrganizations{}, base)
	flowsModule := flows.New(pool, sealer, consent.NewRequests(pool, sealer, base), definitions,
		fakeOrgs{settings: defaultSettings}, &tableEvents{},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), flows.Config{NationalIDFormat: flows.FormatGeneric})
	consoleCfg := oidclogin.ConsoleConfig(cfg)
	consoleCfg.HTTPClient = o.consoleHTTP
	sessions, err := staff.NewSessions(pool, staff.SessionsConfig{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: o.now})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Deps{Config: cfg, Pool: pool, Tokens: ident, Flows: flowsModule, Receipts: receipts, Login: provider,
		ConsoleRP: oidclogin.New(consoleCfg), ConsentRP: oidclogin.New(oidclogin.ConsentConfig(cfg)), Sessions: sessions, Now: o.now})
	hs.Config.Handler = srv
	hs.Start()
	t.Cleanup(hs.Close)
	return loginServer{url: base, srv: srv, cfg: cfg, staff: accounts, sessions: sessions, pool: pool, ident: ident, flows: flowsModule}
}

func randomKey(t *testing.T) []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

const testPassword = "correct horse battery staple"

func (ls loginServer) createStaff(t *testing.T, org, username string, role staff.Role) staff.Account {
	t.Helper()
	a, err := ls.staff.CreateStaff(context.Background(), staff.NewAccount{OrganizationID: org, Username: username,
		Name: "Person " + username, Role: role, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// staffPair is an organization with an admin and a viewer signed in to the
// console, and a second organization to show that nothing crosses over.
type staffPair struct {
	org, other            orgs.Organization
	admin, viewer         *formbrowser.Browser
	adminCSRF, viewerCSRF string
}

// signInStaffPair creates the organizations of a staffPair, its admin "ada"
// and viewer "vic", and signs both in.
func (ls loginServer) signInStaffPair(t *testing.T, name, prefix string) staffPair {
	t.Helper()
	ctx := context.Background()
	var s staffPair
	var err error
	if s.org, err = ls.ident.CreateOrganization(ctx, orgs.NewOrganization{Name: name, ReferencePrefix: prefix}); err != nil {
		t.Fatal(err)
	}
	if s.other, err = ls.ident.CreateOrganization(ctx, orgs.NewOrganization{Name: "Other Bank", ReferencePrefix: "OTH"}); err != nil {
		t.Fatal(err)
	}
	ls.createStaff(t, s.org.ID, "ada", staff.RoleAdmin)
	ls.createStaff(t, s.org.ID, "vic", staff.RoleViewer)
	s.admin, s.viewer = formbrowser.New(t), formbrowser.New(t)
	s.adminCSRF = signInStaff(t, s.admin, ls.url, "ada", testPassword).HiddenFields(t).Get("csrf")
	s.viewerCSRF = signInStaff(t, s.viewer, ls.url, "vic", testPassword).HiddenFields(t).Get("csrf")
	return s
}

// signInStaff drives a console sign-in through the staff form and returns the
// page the browser lands on.
func signInStaff(t *testing.T, b *formbrowser.Browser, base, username, password string) formbrowser.Page {
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

func TestStaffSignInAndOutEndToEnd(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada@example.com", staff.RoleAdmin)
	b := formbrowser.New(t)

	// Step by step: /console → sign-in → provider → form.
	p := b.Get(ls.url + "/console")
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.url+"/console/auth/login?return=%2Fconsole") {
		t.Fatalf("/console without a session: %d %s", p.Status, p.Location)
	}
	p = b.Get(p.Location)
	auth, _ := url.Parse(p.Location)
	q := auth.Query()
	if auth.Path != "/oauth/authorize" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("state") == "" || q.Get("nonce") == "" || q.Get("client_id") != login.ConsoleClientID {
		t.Fatalf("authorization request: %s", p.Location)
	}
	form := b.Follow(http.MethodGet, p.Location, nil)
	if form.Status != 200 || !strings.Contains(form.Body, "Username or e-mail") || strings.Contains(form.Body, "<script") {
		t.Fatalf("sign-in form: %d %s", form.Status, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("username", "ADA@example.com")
	v.Set("password", testPassword)
	p = b.Post(ls.url+"/idp/login", v)
	cb, _ := url.Parse(p.Location)
	if p.Status != http.StatusSeeOther || cb.Path != "/console/auth/callback" || cb.Query().Get("state") != q.Get("state") || cb.Query().Get("code") == "" {
		t.Fatalf("after the form: %d %s", p.Status, p.Location)
	}
	p = b.Get(p.Location)
	if p.Status != http.StatusSeeOther || p.Location != ls.url+"/console" {
		t.Fatalf("callback: %d %s %s", p.Status, p.Location, p.Body)
	}
	var sessionCookie string
	for _, c := range p.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "flowd_console=") {
			sessionCookie = c
		}
	}
	if !strings.Contains(sessionCookie, "HttpOnly") || !strings.Contains(sessionCookie, "SameSite=Lax") || strings.Contains(sessionCookie, "Secure") {
		t.Fatalf("console cookie flags under http: %q", sessionCookie)
	}
	if p := b.Get(ls.url + "/console"); p.Status != http.StatusSeeOther || p.Location != ls.url+"/console/flows" {
		t.Fatalf("console home: %d %s", p.Status, p.Location)
	}
	home := b.Get(ls.url + "/console/flows")
	if home.Status != 200 || !strings.Contains(home.Body, "Person ada@example.com") || !strings.Contains(home.Body, "org-a") ||
		!strings.Contains(home.Body, ">admin<") {
		t.Fatalf("console home: %d %s", home.Status, home.Body)
	}

	// Sign-out needs the session's CSRF token.
	if p := b.Post(ls.url+"/console/auth/logout", url.Values{"csrf": {"forged"}}); p.Status != http.StatusForbidden {
		t.Fatalf("sign-out with a forged CSRF token: %d", p.Status)
	}
	p = b.Post(ls.url+"/console/auth/logout", home.HiddenFields(t))
	end, _ := url.Parse(p.Location)
	if p.Status != http.StatusSeeOther || end.Path != "/oauth/end_session" || end.Query().Get("id_token_hint") == "" ||
		end.Query().Get("post_logout_redirect_uri") != ls.url+"/console/signed-out" {
		t.Fatalf("sign-out: %d %s", p.Status, p.Location)
	}
	out := b.Follow(http.MethodGet, p.Location, nil)
	if out.URL != ls.url+"/console/signed-out" || !strings.Contains(out.Body, "signed out") {
		t.Fatalf("after sign-out: %s %s", out.URL, out.Body)
	}
	// Both the console session and the provider's are gone: the form again.
	again := b.Follow(http.MethodGet, ls.url+"/console", nil)
	if !strings.Contains(again.Body, `name="password"`) {
		t.Fatalf("after sign-out /console did not ask to sign in: %s", again.Body)
	}
}

func TestProviderSessionSignsInAgainWithoutTheForm(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", staff.RoleViewer)
	ls.createStaff(t, "org-a", "bob", staff.RoleViewer)
	b := formbrowser.New(t)
	if p := signInStaff(t, b, ls.url, "ada", testPassword); !strings.Contains(p.Body, ">viewer<") {
		t.Fatalf("sign-in: %s", p.Body)
	}
	// The console session alone is dropped (as when it times out): the
	// provider still knows the browser and signs it in without a form.
	for _, u := range []string{ls.url} {
		parsed, _ := url.Parse(u)
		b.Jar().SetCookies(parsed, []*http.Cookie{{Name: "flowd_console", Value: "", MaxAge: -1, Path: "/"}})
	}
	if p := b.Follow(http.MethodGet, ls.url+"/console", nil); !strings.Contains(p.Body, "Person ada") {
		t.Fatalf("single sign-on: %s", p.Body)
	}
	// A disabled account loses that too.
	if _, err := ls.staff.DisableStaff(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	parsed, _ := url.Parse(ls.url)
	b.Jar().SetCookies(parsed, []*http.Cookie{{Name: "flowd_console", Value: "", MaxAge: -1, Path: "/"}})
	p := b.Follow(http.MethodGet, ls.url+"/console", nil)
	if !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("a disabled account was signed in by its provider session: %s", p.Body)
	}
}

func TestDisabledAccountCannotSignIn(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	if _, err := ls.staff.DisableStaff(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	b := formbrowser.New(t)
	p := signInStaff(t, b, ls.url, "ada", testPassword)
	if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "The username or password is not right.") {
		t.Fatalf("disabled account: %d %s", p.Status, p.Body)
	}
	if p := b.Get(ls.url + "/console"); p.Status != http.StatusSeeOther {
		t.Fatalf("a disabled account got a session: %d", p.Status)
	}
}

func TestDisablingEndsSessions(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	if p := signInStaff(t, b, ls.url, "ada", testPassword); p.Status != 200 {
		t.Fatalf("sign-in: %d", p.Status)
	}
	if _, err := ls.staff.DisableStaff(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	if p := b.Get(ls.url + "/console"); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.url+"/console/auth/login") {
		t.Fatalf("the session of a disabled account: %d %s", p.Status, p.Location)
	}
}

func TestWrongCredentialsLookAlikeAndGuessingIsLimited(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{}) // 3 failures per account, 5 per address
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	ls.createStaff(t, "org-a", "cy", staff.RoleAdmin)
	b := formbrowser.New(t)

	wrongPassword := signInStaff(t, b, ls.url, "ada", "not the password at all")
	unknownUser := signInStaff(t, b, ls.url, "nobody", testPassword)
	msgRE := regexp.MustCompile(`role="alert">([^<]*)<`)
	if wrongPassword.Status != http.StatusUnauthorized || unknownUser.Status != wrongPassword.Status ||
		msgRE.FindString(wrongPassword.Body) == "" || msgRE.FindString(wrongPassword.Body) != msgRE.FindString(unknownUser.Body) {
		t.Fatalf("wrong password and unknown user answer differently:\n%d %s\n%d %s", wrongPassword.Status,
			msgRE.FindString(wrongPassword.Body), unknownUser.Status, msgRE.FindString(unknownUser.Body))
	}
	// Two more failures for ada make three: her account pauses, even for the right password.
	for range 2 {
		if p := signInStaff(t, b, ls.url, "ada", "still not the password"); p.Status != http.StatusUnauthorized {
			t.Fatalf("failure: %d", p.Status)
		}
	}
	p := signInStaff(t, b, ls.url, "ada", testPassword)
	if p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") == "" || !strings.Contains(p.Body, "Too many failed attempts") {
		t.Fatalf("fourth attempt for a paused account: %d %q %s", p.Status, p.Header.Get("Retry-After"), p.Body)
	}
	// cy's account is fine until the address reaches five failures (four so far).
	if p := signInStaff(t, b, ls.url, "cy", "wrong for cy too"); p.Status != http.StatusUnauthorized {
		t.Fatalf("cy's failure: %d", p.Status)
	}
	if p := signInStaff(t, b, ls.url, "cy", testPassword); p.Status != http.StatusTooManyRequests {
		t.Fatalf("the address is over its limit, yet: %d %s", p.Status, p.Body)
	}
}

func TestTestEIDSignIn(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.srv.Echo().GET("/consent/test-whoami", func(c echo.Context) error {
		id, ok, err := ls.srv.consentIdentityOf(c)
		if err != nil {
			return err
		}
		if !ok {
			return c.String(http.StatusUnauthorized, "nobody")
		}
		return c.JSON(http.StatusOK, id)
	})
	b := formbrowser.New(t)
	form := b.Follow(http.MethodGet, ls.url+"/consent/auth/login?return=%2Fconsent%2Ftest-whoami", nil)
	if form.Status != 200 || !strings.Contains(form.Body, "TEST identity provider") || !strings.Contains(form.Body, `name="national_id"`) {
		t.Fatalf("test eID page: %d %s", form.Status, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("national_id", "12 34")
	if p := b.Post(ls.url+"/idp/login", v); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "1 to 64 letters") {
		t.Fatalf("a malformed national id: %d %s", p.Status, p.Body)
	}
	v.Set("national_id", "01017012345")
	// The tester picks the level, substantial unless asked for another; a
	// level the test eID does not offer is refused and issues nothing.
	if !regexp.MustCompile(`value="substantial" checked`).MatchString(form.Body) || !strings.Contains(form.Body, `value="high"`) {
		t.Fatalf("the test eID's levels: %s", form.Body)
	}
	v.Set("level", "extreme")
	if p := b.Post(ls.url+"/idp/login", v); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "Pick one of the levels offered.") {
		t.Fatalf("an unknown level: %d %s", p.Status, p.Body)
	}
	v.Set("level", "high")
	p := b.Follow(http.MethodPost, ls.url+"/idp/login", v)
	var id ConsentIdentity
	if err := json.Unmarshal([]byte(p.Body), &id); err != nil || id.NationalID != "01017012345" || !id.TestIdentity ||
		id.CSRF == "" || strings.Contains(id.Subject, "01017012345") || id.ACR != consent.DefaultACRMap[consent.AssuranceHigh] {
		t.Fatalf("consent identity: %s (%v)", p.Body, err)
	}
	// An open redirect is not possible through return.
	p = b.Get(ls.url + "/consent/auth/login?return=https%3A%2F%2Fevil.example%2F")
	if p.Status != http.StatusSeeOther {
		t.Fatalf("login with a foreign return: %d", p.Status)
	}
}

// TestConsentSignInAsksForThePageLanguage: the consent sign-in tells the
// eID the language of the consent pages in ui_locales, chosen as the pages
// choose it (the switch's cookie, else Accept-Language), and the built-in
// test eID then speaks it.
func TestConsentSignInAsksForThePageLanguage(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	tests := []struct {
		name           string
		acceptLanguage string
		cookie         string // flowd_lang, the consent pages' switch
		start          string // where the person starts the sign-in
		want           string // ui_locales
		lang           string // of the test eID page
	}{
		{"Norwegian browser", "nb-NO,nb;q=0.9,en;q=0.5", "", "/consent/some-token/login", "nb en", "nb"},
		{"Nynorsk browser", "nn-NO", "", "/consent/some-token/login", "nb en", "nb"},
		{"English browser", "en-GB,en;q=0.9", "", "/consent/some-token/login", "en", "en"},
		{"unknown language", "de-DE", "", "/consent/some-token/login", "en", "en"},
		{"switched to Norwegian", "en", "nb", "/consent/some-token/login", "nb en", "nb"},
		{"switched to English", "nb", "en", "/consent/some-token/login", "en", "en"},
		{"callback route, Norwegian", "nb", "", "/consent/auth/login?return=%2Fconsent%2Fx", "nb en", "nb"},
		{"callback route, English", "", "", "/consent/auth/login?return=%2Fconsent%2Fx", "en", "en"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := formbrowser.New(t)
			b.AcceptLanguage = tt.acceptLanguage
			if tt.cookie != "" {
				u, _ := url.Parse(ls.url)
				b.Jar().SetCookies(u, []*http.Cookie{{Name: "flowd_lang", Value: tt.cookie, Path: "/"}})
			}
			p := b.Get(ls.url + tt.start)
			if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.url+"/oauth/authorize?") {
				t.Fatalf("not sent to the provider: %d %s", p.Status, p.Location)
			}
			if got := mustQuery(t, p.Location)["ui_locales"]; len(got) != 1 || got[0] != tt.want {
				t.Fatalf("ui_locales = %q, want %q (%s)", got, tt.want, p.Location)
			}
			// The test eID follows ui_locales, not its own guess: with the
			// cookie gone, only ui_locales can carry a switched language.
			u, _ := url.Parse(ls.url)
			b.Jar().SetCookies(u, []*http.Cookie{{Name: "flowd_lang", Value: "", Path: "/", MaxAge: -1}})
			form := b.Follow(http.MethodGet, p.Location, nil)
			if form.Status != http.StatusOK || !strings.Contains(form.Body, `<html lang="`+tt.lang+`"`) {
				t.Fatalf("test eID page, want lang %s: %d %s", tt.lang, form.Status, form.Body)
			}
		})
	}
}

// TestTestEIDSpeaksTheRequestedLanguage: the built-in provider's test eID
// form is in the first language of ui_locales that it has, else in the
// browser's Accept-Language, else English, and its error re-render after a
// POST stays in the language the form was shown in, also after the form's
// own language switch.
func TestTestEIDSpeaksTheRequestedLanguage(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	type texts struct{ lang, label, error string }
	english := texts{"en", "National identity number", "Type a national identity number"}
	norwegian := texts{"nb", "Fødselsnummer", "Skriv et fødselsnummer"}
	tests := []struct {
		name           string
		uiLocales      string
		acceptLanguage string
		want           texts
	}{
		{"ui_locales nb", "nb", "", norwegian},
		{"ui_locales nb over Accept-Language", "nb", "en-GB,en;q=0.9", norwegian},
		{"ui_locales en over Accept-Language", "en", "nb-NO,nb;q=0.9", english},
		{"first one we have", "de nn-NO en", "en", norwegian},
		{"no ui_locales: Accept-Language", "", "nb-NO,nb;q=0.9,en;q=0.5", norwegian},
		{"none we have: Accept-Language", "de fr", "no", norwegian},
		{"nothing: English", "", "", english},
		{"none we have anywhere: English", "sv", "fr-FR", english},
	}
	check := func(t *testing.T, p formbrowser.Page, want texts, status int, withError bool) {
		t.Helper()
		if p.Status != status || !strings.Contains(p.Body, `<html lang="`+want.lang+`"`) || !strings.Contains(p.Body, want.label) ||
			strings.Contains(p.Body, want.error) != withError {
			t.Fatalf("want %s (error shown: %v), got %d:\n%s", want.lang, withError, p.Status, p.Body)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := formbrowser.New(t)
			b.AcceptLanguage = tt.acceptLanguage
			_, challenge := pkcePair()
			q := url.Values{"response_type": {"code"}, "client_id": {login.ConsentClientID}, "redirect_uri": {ls.url + "/consent/auth/callback"},
				"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
			if tt.uiLocales != "" {
				q.Set("ui_locales", tt.uiLocales)
			}
			form := b.Follow(http.MethodGet, ls.url+"/oauth/authorize?"+q.Encode(), nil)
			check(t, form, tt.want, http.StatusOK, false)

			v := form.HiddenFields(t)
			v.Set("national_id", "not a national id")
			check(t, b.Post(ls.url+"/idp/login", v), tt.want, http.StatusBadRequest, true)
		})
	}

	t.Run("the form's switch wins and holds through the POST", func(t *testing.T) {
		t.Parallel()
		b := formbrowser.New(t)
		_, challenge := pkcePair()
		q := url.Values{"response_type": {"code"}, "client_id": {login.ConsentClientID}, "redirect_uri": {ls.url + "/consent/auth/callback"},
			"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
			"ui_locales": {"nb"}}
		form := b.Follow(http.MethodGet, ls.url+"/oauth/authorize?"+q.Encode(), nil)
		check(t, form, norwegian, http.StatusOK, false)
		m := regexp.MustCompile(`class="lang-switch" href="([^"]+)"`).FindStringSubmatch(form.Body)
		if m == nil {
			t.Fatalf("no language switch: %s", form.Body)
		}
		switched := b.Get(ls.url + html.UnescapeString(m[1]))
		check(t, switched, english, http.StatusOK, false)
		// The switch is remembered (the cookie) but the POST holds its
		// language by itself: with the cookie gone and a Norwegian
		// browser, the error is still in English.
		u, _ := url.Parse(ls.url)
		b.Jar().SetCookies(u, []*http.Cookie{{Name: "flowd_lang", Value: "", Path: "/", MaxAge: -1}})
		b.AcceptLanguage = "nb"
		v := switched.HiddenFields(t)
		v.Set("national_id", "")
		check(t, b.Post(ls.url+"/idp/login", v), english, http.StatusBadRequest, true)
	})
}

func TestConsentWithAnExternalEIDAndAnotherClaimName(t *testing.T) {
	t.Parallel()
	rpListener := newListener()
	issuer := setupLogin(t, loginOptions{env: map[string]string{"FLOWD_CONSENT_NATIONAL_ID_CLAIM": "nin"},
		extraClients: func(string) []login.Client {
			return []login.Client{{ID: "bank-consent", Name: "a bank's consent pages", Secret: "eid secret", Method: login.MethodTestEID,
				RedirectURIs: []string{baseOf(rpListener) + "/consent/auth/callback"}}}
		}})
	ls := setupLogin(t, loginOptions{preset: rpListener, env: map[string]string{
		"FLOWD_CONSENT_OIDC_ISSUER": issuer.url, "FLOWD_CONSENT_OIDC_CLIENT_ID": "bank-consent",
		"FLOWD_CONSENT_OIDC_CLIENT_SECRET": "eid secret", "FLOWD_CONSENT_NATIONAL_ID_CLAIM": "nin",
		"FLOWD_TEST_EID": "false", // this server's own test eID is off; the external one is used
	}})
	ls.srv.Echo().GET("/consent/test-whoami", func(c echo.Context) error {
		id, ok, err := ls.srv.consentIdentityOf(c)
		if err != nil {
			return err
		}
		if !ok {
			return c.String(http.StatusUnauthorized, "nobody")
		}
		return c.JSON(http.StatusOK, id)
	})
	b := formbrowser.New(t)
	b.AcceptLanguage = "nb-NO,nb;q=0.9"
	start := b.Get(ls.url + "/consent/auth/login?return=%2Fconsent%2Ftest-whoami")
	if !strings.HasPrefix(start.Location, issuer.url+"/oauth/authorize?") || mustQuery(t, start.Location).Get("ui_locales") != "nb en" {
		t.Fatalf("the external eID is not asked for the page language: %s", start.Location)
	}
	form := b.Follow(http.MethodGet, start.Location, nil)
	if !strings.HasPrefix(form.URL, issuer.url+"/idp/login") || !strings.Contains(form.Body, `<html lang="nb"`) {
		t.Fatalf("not sent to the external eID, or not in Norwegian: %s %s", form.URL, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("national_id", "19850101-1234")
	p := b.Follow(http.MethodPost, issuer.url+"/idp/login", v)
	var id ConsentIdentity
	if err := json.Unmarshal([]byte(p.Body), &id); err != nil || id.NationalID != "19850101-1234" || id.Issuer != issuer.url {
		t.Fatalf("consent identity through the external eID: %s (%v)", p.Body, err)
	}
}

func TestTestEIDOffIsRefused(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{env: map[string]string{"FLOWD_TEST_EID": "false"}})
	b := formbrowser.New(t)
	p := b.Follow(http.MethodGet, ls.url+"/consent/auth/login?return=%2Fconsent%2Fx", nil)
	if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "access_denied") {
		t.Fatalf("test eID while off: %d %s", p.Status, p.Body)
	}
	// Only the test eID issues an acr: with it off, discovery names none.
	if doc := discovery(t, ls.url); doc["acr_values_supported"] != nil {
		t.Fatalf("acr_values_supported with the test eID off: %v", doc["acr_values_supported"])
	}
}

func TestCallbackRefusesAWrongState(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	form := b.Follow(http.MethodGet, ls.url+"/console", nil)
	v := form.HiddenFields(t)
	v.Set("username", "ada")
	v.Set("password", testPassword)
	p := b.Post(ls.url+"/idp/login", v)
	cb, _ := url.Parse(p.Location)
	q := cb.Query()
	q.Set("state", "forged-"+q.Get("state"))
	cb.RawQuery = q.Encode()
	if p := b.Get(cb.String()); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "Sign-in expired") {
		t.Fatalf("callback with a wrong state: %d %s", p.Status, p.Body)
	}
	// And from another browser, the right state is as unknown.
	other := formbrowser.New(t)
	if p2 := other.Get(p.Location); p2.Status != http.StatusBadRequest {
		t.Fatalf("callback in another browser: %d", p2.Status)
	}
	if p := b.Get(ls.url + "/console"); p.Status != http.StatusSeeOther {
		t.Fatalf("a session after refused callbacks: %d", p.Status)
	}
}

func TestSignInFormIsBoundToItsBrowser(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	victim, attacker := formbrowser.New(t), formbrowser.New(t)
	form := attacker.Follow(http.MethodGet, ls.url+"/console", nil)
	v := form.HiddenFields(t)
	v.Set("username", "ada")
	v.Set("password", testPassword)
	// Posting the attacker's form from the victim's browser (login CSRF) fails.
	if p := victim.Post(ls.url+"/idp/login", v); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "expired") {
		t.Fatalf("a form posted from another browser: %d %s", p.Status, p.Body)
	}
	// So does a wrong CSRF token in the right browser.
	v.Set("csrf", "forged")
	if p := attacker.Post(ls.url+"/idp/login", v); p.Status != http.StatusBadRequest {
		t.Fatalf("a forged form token: %d", p.Status)
	}
}

// pkcePair returns a verifier and its S256 challenge.
func pkcePair() (string, string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(v))
	return v, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeCode signs ada in, in a fresh browser, as the console client
// would, but stops at the redirect to the callback and returns the code.
func authorizeCode(t *testing.T, ls loginServer, challenge string) string {
	t.Helper()
	return authorizeCodeFor(t, ls, login.ConsoleClientID, ls.url+"/console/auth/callback", challenge)
}

// authorizeCodeFor is authorizeCode for the staff client clientID with its
// registered redirect URI.
func authorizeCodeFor(t *testing.T, ls loginServer, clientID, redirectURI, challenge string) string {
	t.Helper()
	b := formbrowser.New(t)
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI},
		"scope": {"openid profile"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	form := b.Follow(http.MethodGet, ls.url+"/oauth/authorize?"+q.Encode(), nil)
	v := form.HiddenFields(t)
	v.Set("username", "ada")
	v.Set("password", testPassword)
	p := b.Post(ls.url+"/idp/login", v)
	cq := mustQuery(t, p.Location)
	if cq.Get("state") != "st" || cq.Get("iss") != ls.url || cq.Get("code") == "" {
		t.Fatalf("redirect with the code: %s", p.Location)
	}
	return cq.Get("code")
}

func mustQuery(t *testing.T, u string) url.Values {
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return parsed.Query()
}

type tokenAnswer struct {
	status int
	body   map[string]any
	header http.Header
}

func exchange(t *testing.T, ls loginServer, form url.Values, basic bool) tokenAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ls.url+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(login.ConsoleClientID, login.BuiltInClientSecret(ls.cfg.SessionKey, login.ConsoleClientID))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return tokenAnswer{resp.StatusCode, body, resp.Header}
}

func userinfo(t *testing.T, ls loginServer, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ls.url+"/oauth/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestCodeExchange(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	redirect := ls.url + "/console/auth/callback"

	t.Run("works once, and a replay revokes what it issued", func(t *testing.T) {
		verifier, challenge := pkcePair()
		code := authorizeCode(t, ls, challenge)
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
		first := exchange(t, ls, form, true)
		if first.status != 200 || first.body["id_token"] == nil || first.body["token_type"] != "Bearer" || first.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("exchange: %d %v", first.status, first.body)
		}
		idt, _ := first.body["id_token"].(string)
		parts := strings.Split(idt, ".")
		if len(parts) != 3 {
			t.Fatalf("id_token %q", idt)
		}
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var claims map[string]any
		if err := json.Unmarshal(payload, &claims); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]any{"iss": ls.url, "aud": login.ConsoleClientID, "nonce": "nn", "org_id": "org-a",
			"preferred_username": "ada", "name": "Person ada"} {
			if claims[k] != want {
				t.Errorf("id_token %s = %v, want %v", k, claims[k], want)
			}
		}
		exp, _ := claims["exp"].(float64)
		iat, _ := claims["iat"].(float64)
		authTime, _ := claims["auth_time"].(float64)
		roles, _ := claims["roles"].([]any)
		if exp-iat != 300 || authTime == 0 || authTime > iat || len(roles) != 1 || roles[0] != "admin" || claims["sub"] == "" {
			t.Errorf("id_token times or roles: %v", claims)
		}
		access, _ := first.body["access_token"].(string)
		status, claims := userinfo(t, ls, access)
		if status != 200 || claims["org_id"] != "org-a" || claims["preferred_username"] != "ada" {
			t.Fatalf("userinfo: %d %v", status, claims)
		}
		second := exchange(t, ls, form, true)
		if second.status != 400 || second.body["error"] != "invalid_grant" {
			t.Fatalf("a reused code: %d %v", second.status, second.body)
		}
		if status, _ := userinfo(t, ls, access); status != http.StatusUnauthorized {
			t.Fatalf("the token of a replayed code still works: %d", status)
		}
	})

	tests := []struct {
		name   string
		mutate func(form url.Values, verifier string)
		basic  bool
		status int
		error  string
	}{
		{"missing verifier", func(f url.Values, _ string) { f.Del("code_verifier") }, true, 400, "invalid_request"},
		{"wrong verifier", func(f url.Values, _ string) {
			v, _ := pkcePair()
			f.Set("code_verifier", v)
		}, true, 400, "invalid_grant"},
		{"other redirect_uri", func(f url.Values, _ string) { f.Set("redirect_uri", ls.url+"/elsewhere") }, true, 400, "invalid_grant"},
		{"no client authentication", func(f url.Values, _ string) {}, false, 401, "invalid_client"},
		{"wrong client secret in the body", func(f url.Values, _ string) {
			f.Set("client_id", login.ConsoleClientID)
			f.Set("client_secret", "guess")
		}, false, 401, "invalid_client"},
		{"unknown code", func(f url.Values, _ string) { f.Set("code", "made-up") }, true, 400, "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verifier, challenge := pkcePair()
			code := authorizeCode(t, ls, challenge)
			form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
			tt.mutate(form, verifier)
			got := exchange(t, ls, form, tt.basic)
			if got.status != tt.status || got.body["error"] != tt.error {
				t.Fatalf("got %d %v, want %d %s", got.status, got.body, tt.status, tt.error)
			}
		})
	}

	t.Run("a wrong verifier uses the code up", func(t *testing.T) {
		verifier, challenge := pkcePair()
		code := authorizeCode(t, ls, challenge)
		other, _ := pkcePair()
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {other}}
		exchange(t, ls, form, true)
		form.Set("code_verifier", verifier)
		if got := exchange(t, ls, form, true); got.status != 400 || got.body["error"] != "invalid_grant" {
			t.Fatalf("the right verifier after a wrong one: %d %v", got.status, got.body)
		}
	})
}

// TestIDTokenSigningAlgorithms has go-oidc discover the built-in provider
// and verify its ID tokens against the JWKS with one algorithm only, as
// Spring Security's default decoder does with RS256: RS256 is the default,
// and a client registered for ES256 gets ES256.
func TestIDTokenSigningAlgorithms(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{extraClients: func(base string) []login.Client {
		return []login.Client{{ID: "es-client", Name: "an ES256 relying party", Secret: "es secret", Method: login.MethodStaff,
			RedirectURIs: []string{base + "/es/callback"}, IDTokenSignedResponseAlg: jose.ES256}}
	}})
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, ls.url)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, clientID, secret, redirect string
		alg, otherAlg                    string
	}{
		{"the console, by default", login.ConsoleClientID, login.BuiltInClientSecret(ls.cfg.SessionKey, login.ConsoleClientID),
			ls.url + "/console/auth/callback", oidc.RS256, oidc.ES256},
		{"a client registered for ES256", "es-client", "es secret", ls.url + "/es/callback", oidc.ES256, oidc.RS256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verifier, challenge := pkcePair()
			code := authorizeCodeFor(t, ls, tt.clientID, tt.redirect, challenge)
			oc := oauth2.Config{ClientID: tt.clientID, ClientSecret: tt.secret, Endpoint: provider.Endpoint(), RedirectURL: tt.redirect}
			tok, err := oc.Exchange(ctx, code, oauth2.VerifierOption(verifier))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := tok.Extra("id_token").(string)
			idt, err := provider.Verifier(&oidc.Config{ClientID: tt.clientID, SupportedSigningAlgs: []string{tt.alg}}).Verify(ctx, raw)
			if err != nil || idt.Nonce != "nn" {
				t.Fatalf("go-oidc with %s only: %v", tt.alg, err)
			}
			if _, err := provider.Verifier(&oidc.Config{ClientID: tt.clientID, SupportedSigningAlgs: []string{tt.otherAlg}}).Verify(ctx, raw); err == nil {
				t.Fatalf("go-oidc with %s only accepted the ID token too", tt.otherAlg)
			}
			jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
			if err != nil {
				t.Fatal(err)
			}
			kid := jws.Signatures[0].Header.KeyID
			set := fetchJWKS(t, ls.url)
			keys := set.Key(kid)
			if len(keys) != 1 || keys[0].Algorithm != tt.alg || keys[0].Use != "sig" || !keys[0].IsPublic() {
				t.Fatalf("JWKS entry of the ID token's key %q: %+v", kid, keys)
			}
			if pub, ok := keys[0].Key.(*rsa.PublicKey); tt.alg == oidc.RS256 && (!ok || pub.N.BitLen() < 2048) {
				t.Fatalf("RS256 key %T, at least 2048 bits wanted", keys[0].Key)
			}
		})
	}

	t.Run("an ID token of the previous key verifies after a rotation", func(t *testing.T) {
		idToken := func() string {
			verifier, challenge := pkcePair()
			code := authorizeCode(t, ls, challenge)
			got := exchange(t, ls, url.Values{"grant_type": {"authorization_code"}, "code": {code},
				"redirect_uri": {ls.url + "/console/auth/callback"}, "code_verifier": {verifier}}, true)
			raw, _ := got.body["id_token"].(string)
			return raw
		}
		before := idToken()
		if _, err := ls.ident.RotateSigningKeys(ctx); err != nil {
			t.Fatal(err)
		}
		after := idToken()
		// A relying party that meets the new key id fetches the JWKS again.
		fresh, err := oidc.NewProvider(ctx, ls.url)
		if err != nil {
			t.Fatal(err)
		}
		v := fresh.Verifier(&oidc.Config{ClientID: login.ConsoleClientID, SupportedSigningAlgs: []string{oidc.RS256}})
		for _, raw := range []string{after, before} {
			if _, err := v.Verify(ctx, raw); err != nil {
				t.Fatalf("RS256 ID token after the rotation: %v", err)
			}
		}
		if kidOf(before) == kidOf(after) {
			t.Fatalf("the rotation did not change the ID token key: %s", kidOf(after))
		}
	})
}

// kidOf returns the kid in the header of a compact JWS.
func kidOf(raw string) string {
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil || len(jws.Signatures) != 1 {
		return ""
	}
	return jws.Signatures[0].Header.KeyID
}

// fetchJWKS reads the key set at /oauth/jwks.
func fetchJWKS(t *testing.T, base string) jose.JSONWebKeySet {
	t.Helper()
	resp, err := http.Get(base + "/oauth/jwks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	return set
}

func TestAuthorizeRefusesBadRequests(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	_, challenge := pkcePair()
	good := func() url.Values {
		return url.Values{"response_type": {"code"}, "client_id": {login.ConsoleClientID}, "redirect_uri": {ls.url + "/console/auth/callback"},
			"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	}
	tests := []struct {
		name   string
		mutate func(url.Values)
		// error is the error sent back to the client; "" means an error page
		// with no redirect at all.
		error string
	}{
		{"unregistered redirect URI", func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }, ""},
		{"redirect URI with extra path", func(q url.Values) { q.Set("redirect_uri", ls.url+"/console/auth/callback/x") }, ""},
		{"unknown client", func(q url.Values) { q.Set("client_id", "stranger") }, ""},
		{"no PKCE", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, "invalid_request"},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }, "invalid_request"},
		{"implicit flow", func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
		{"not OpenID", func(q url.Values) { q.Set("scope", "profile") }, "invalid_scope"},
		{"no nonce", func(q url.Values) { q.Del("nonce") }, "invalid_request"},
		{"prompt=none without a session", func(q url.Values) { q.Set("prompt", "none") }, "login_required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := good()
			tt.mutate(q)
			p := formbrowser.New(t).Get(ls.url + "/oauth/authorize?" + q.Encode())
			if tt.error == "" {
				if p.Status != http.StatusBadRequest || p.Location != "" || !strings.Contains(p.Body, "Sign-in request refused") {
					t.Fatalf("want an error page without redirect, got %d %q", p.Status, p.Location)
				}
				return
			}
			rq := mustQuery(t, p.Location)
			// RFC 9207: error responses name the issuer too.
			if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.url+"/console/auth/callback?") ||
				rq.Get("error") != tt.error || rq.Get("state") != "st" || rq.Get("iss") != ls.url {
				t.Fatalf("want %s back at the client, got %d %s", tt.error, p.Status, p.Location)
			}
		})
	}
}

func TestEndSessionRefusesUnregisteredReturn(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	b := formbrowser.New(t)
	q := url.Values{"client_id": {login.ConsoleClientID}, "post_logout_redirect_uri": {"https://evil.example/"}}
	if p := b.Get(ls.url + "/oauth/end_session?" + q.Encode()); p.Status != http.StatusBadRequest || p.Location != "" {
		t.Fatalf("unregistered post-logout address: %d %s", p.Status, p.Location)
	}
	q.Set("post_logout_redirect_uri", ls.url+"/console/signed-out")
	q.Set("state", "s1")
	if p := b.Get(ls.url + "/oauth/end_session?" + q.Encode()); p.Status != http.StatusSeeOther || p.Location != ls.url+"/console/signed-out?state=s1" {
		t.Fatalf("registered post-logout address: %d %s", p.Status, p.Location)
	}
	q.Set("id_token_hint", "eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
	if p := b.Get(ls.url + "/oauth/end_session?" + q.Encode()); p.Status != http.StatusBadRequest {
		t.Fatalf("a forged id_token_hint: %d %s", p.Status, p.Location)
	}
}

// tamperingTransport changes the organization in every ID token the relying
// party receives, keeping the signature: a tampered token.
type tamperingTransport struct{ from, to string }

func (tt tamperingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.URL.Path != "/oauth/token" {
		return resp, err
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var body map[string]any
	if json.Unmarshal(raw, &body) == nil {
		if idt, ok := body["id_token"].(string); ok {
			parts := strings.Split(idt, ".")
			payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
			payload = []byte(strings.Replace(string(payload), tt.from, tt.to, 1))
			parts[1] = base64.RawURLEncoding.EncodeToString(payload)
			body["id_token"] = strings.Join(parts, ".")
			raw, _ = json.Marshal(body)
		}
	}
	resp.Body = io.NopCloser(strings.NewReader(string(raw)))
	resp.ContentLength = int64(len(raw))
	resp.Header.Del("Content-Length")
	return resp, nil
}

func TestOrganizationComesOnlyFromAVerifiedToken(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	ls.createStaff(t, "org-b", "bea", staff.RoleViewer)
	ada, bea := formbrowser.New(t), formbrowser.New(t)
	a, bp := signInStaff(t, ada, ls.url, "ada", testPassword), signInStaff(t, bea, ls.url, "bea", testPassword)
	if !strings.Contains(a.Body, "org-a") || strings.Contains(a.Body, "org-b") || !strings.Contains(bp.Body, "org-b") || strings.Contains(bp.Body, "org-a") {
		t.Fatalf("sessions mixed organizations:\nada: %s\nbea: %s", a.Body, bp.Body)
	}

	// A relying party that receives ada's token with org-b written into it refuses it.
	tampered := setupLogin(t, loginOptions{consoleHTTP: &http.Client{Transport: tamperingTransport{from: `"org-a"`, to: `"org-b"`}}})
	tampered.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	p := signInStaff(t, b, tampered.url, "ada", testPassword)
	if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "Sign-in failed") {
		t.Fatalf("a tampered ID token: %d %s", p.Status, p.Body)
	}
	if p := b.Get(tampered.url + "/console"); p.Status != http.StatusSeeOther {
		t.Fatalf("a tampered ID token gave a session: %d %s", p.Status, p.Body)
	}
}

func TestRelyingPartyWithAnExternalIssuerAndOtherClaimNames(t *testing.T) {
	t.Parallel()
	// Three flowd servers sign their staff in at a fourth, independent one,
	// whose tokens name the organization "tenant" and the roles "groups".
	type rp struct {
		name       string
		orgClaim   string
		rolesClaim string
		want       string
		status     int
	}
	rps := []rp{
		{"claims configured to match", "tenant", "groups", `<span class="console-org">tenant-7</span>`, 200},
		{"roles claim missing", "tenant", "roles", "has no console role", 403},
		{"organization claim missing", "org_id", "groups", "not linked to an organization", 403},
	}
	listeners := make([]*httptest.Server, len(rps))
	for i := range rps {
		listeners[i] = newListener()
	}
	issuer := setupLogin(t, loginOptions{orgClaim: "tenant", rolesClaim: "groups", extraClients: func(string) []login.Client {
		var cs []login.Client
		for i, l := range listeners {
			cs = append(cs, login.Client{ID: "external-" + string(rune('a'+i)), Name: "an external console", Secret: "external secret",
				Method: login.MethodStaff, RedirectURIs: []string{baseOf(l) + "/console/auth/callback"},
				PostLogoutRedirectURIs: []string{baseOf(l) + "/console/signed-out"}})
		}
		return cs
	}})
	issuer.createStaff(t, "tenant-7", "eve@tenant.example", staff.RoleAdmin)
	for i, r := range rps {
		t.Run(r.name, func(t *testing.T) {
			ls := setupLogin(t, loginOptions{preset: listeners[i], env: map[string]string{
				"FLOWD_CONSOLE_OIDC_ISSUER": issuer.url, "FLOWD_CONSOLE_OIDC_CLIENT_ID": "external-" + string(rune('a'+i)),
				"FLOWD_CONSOLE_OIDC_CLIENT_SECRET": "external secret", "FLOWD_CONSOLE_ORG_CLAIM": r.orgClaim,
				"FLOWD_CONSOLE_ROLES_CLAIM": r.rolesClaim,
			}})
			b := formbrowser.New(t)
			form := b.Follow(http.MethodGet, ls.url+"/console", nil)
			if !strings.HasPrefix(form.URL, issuer.url+"/idp/login") {
				t.Fatalf("not sent to the external issuer: %s", form.URL)
			}
			v := form.HiddenFields(t)
			v.Set("username", "eve@tenant.example")
			v.Set("password", testPassword)
			p := b.Follow(http.MethodPost, issuer.url+"/idp/login", v)
			if p.Status != r.status || !strings.Contains(p.Body, r.want) {
				t.Fatalf("got %d, want %d with %q: %s", p.Status, r.status, r.want, p.Body)
			}
			if r.status != 200 {
				return
			}
			out := b.Follow(http.MethodPost, ls.url+"/console/auth/logout", p.HiddenFields(t))
			if out.URL != ls.url+"/console/signed-out" {
				t.Fatalf("logout at the external issuer did not come back: %s", out.URL)
			}
		})
	}
}

func TestConsoleMiddlewareChecksCSRFAndRole(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)
	ls.createStaff(t, "org-a", "vic", staff.RoleViewer)
	ls.srv.Echo().POST("/console/test-change", func(c echo.Context) error {
		return c.String(http.StatusOK, "changed for "+staffOf(c).OrganizationID)
	}, ls.srv.requireStaff, requireAdmin)

	admin, viewer, stranger := formbrowser.New(t), formbrowser.New(t), formbrowser.New(t)
	adminHome := signInStaff(t, admin, ls.url, "ada", testPassword)
	viewerHome := signInStaff(t, viewer, ls.url, "vic", testPassword)
	tests := []struct {
		name   string
		b      *formbrowser.Browser
		form   url.Values
		status int
	}{
		{"admin with the token", admin, adminHome.HiddenFields(t), http.StatusOK},
		{"admin without the token", admin, url.Values{}, http.StatusForbidden},
		{"admin with the viewer's token", admin, viewerHome.HiddenFields(t), http.StatusForbidden},
		{"viewer with the token", viewer, viewerHome.HiddenFields(t), http.StatusForbidden},
		{"no session", stranger, adminHome.HiddenFields(t), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.b.Post(ls.url+"/console/test-change", tt.form)
			if p.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", p.Status, tt.status, p.Body)
			}
			if tt.status == http.StatusOK && p.Body != "changed for org-a" {
				t.Fatalf("body %q", p.Body)
			}
		})
	}
}

// TestUserInfoChallenges: userinfo names invalid_token only when a token
// came (RFC 6750 section 3.1).
func TestUserInfoChallenges(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	for _, tt := range []struct {
		name, authorization, want string
	}{
		{"no credentials", "", `Bearer realm="flowd"`},
		{"another scheme", "Basic Zm9vOmJhcg==", `Bearer realm="flowd"`},
		{"an unknown token", "Bearer not-a-token", `Bearer realm="flowd", error="invalid_token"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, ls.url+"/oauth/userinfo", nil)
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != tt.want {
				t.Fatalf("%d, WWW-Authenticate %q, want %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tt.want)
			}
		})
	}
}

// discovery returns the provider metadata document served at base.
func discovery(t *testing.T, base string) map[string]any {
	t.Helper()
	resp, err := http.Get(base + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("discovery: %d %v", resp.StatusCode, err)
	}
	return doc
}

// levelRadioRE finds the test eID's level radios and whether each is checked.
var levelRadioRE = regexp.MustCompile(`<input type="radio" name="level" value="([^"]*)"( checked)?`)

// testEIDLevels returns the levels a test eID page offers, in order, and
// the one checked.
func testEIDLevels(body string) (offered []string, checked string) {
	for _, m := range levelRadioRE.FindAllStringSubmatch(body, -1) {
		offered = append(offered, m[1])
		if m[2] != "" {
			checked = m[1]
		}
	}
	return offered, checked
}

// TestTestEIDOffersTheMapsLevels: the test eID offers the levels
// FLOWD_CONSENT_ACR_MAP maps, weakest first, and discovery lists their acr
// values; the form preselects the first acr of acr_values that the map
// knows, else substantial; a level not offered is refused and issues
// nothing; the ID token carries the chosen level's acr and the test marker.
func TestTestEIDOffersTheMapsLevels(t *testing.T) {
	t.Parallel()
	const (
		idporten = "substantial=idporten-loa-substantial,high=idporten-loa-high"
		eidas    = "http://eidas.europa.eu/LoA/"
	)
	servers := map[string]loginServer{}
	for _, acrMap := range []string{"", idporten} {
		servers[acrMap] = setupLogin(t, loginOptions{env: map[string]string{"FLOWD_CONSENT_ACR_MAP": acrMap}})
	}
	t.Run("discovery", func(t *testing.T) {
		for acrMap, want := range map[string][]any{
			"":       {eidas + "low", eidas + "substantial", eidas + "high"},
			idporten: {"idporten-loa-substantial", "idporten-loa-high"},
		} {
			if got, _ := discovery(t, servers[acrMap].url)["acr_values_supported"].([]any); !slices.Equal(got, want) {
				t.Errorf("FLOWD_CONSENT_ACR_MAP=%q: acr_values_supported = %v, want %v", acrMap, got, want)
			}
		}
	})
	tests := []struct {
		name        string
		acrMap      string
		acrValues   string
		offered     []string
		preselected string
		pick        string
		wantACR     string // empty: the level is refused
	}{
		{"nothing asked: substantial", "", "", []string{"low", "substantial", "high"}, "substantial", "high", eidas + "high"},
		{"high asked", "", eidas + "high", []string{"low", "substantial", "high"}, "high", "low", eidas + "low"},
		{"the first acr the map knows", "", "urn:other " + eidas + "low " + eidas + "high", []string{"low", "substantial", "high"}, "low", "substantial", eidas + "substantial"},
		{"an acr the map does not know", "", "idporten-loa-high", []string{"low", "substantial", "high"}, "substantial", "substantial", eidas + "substantial"},
		{"a level that does not exist", "", "", []string{"low", "substantial", "high"}, "substantial", "extreme", ""},
		{"ID-porten: high asked", idporten, "idporten-loa-high", []string{"substantial", "high"}, "high", "high", "idporten-loa-high"},
		{"ID-porten: eIDAS asked", idporten, eidas + "high", []string{"substantial", "high"}, "substantial", "substantial", "idporten-loa-substantial"},
		{"ID-porten: low is not offered", idporten, "", []string{"substantial", "high"}, "substantial", "low", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ls := servers[tt.acrMap]
			b := formbrowser.New(t)
			verifier, challenge := pkcePair()
			redirect := ls.url + "/consent/auth/callback"
			q := url.Values{"response_type": {"code"}, "client_id": {login.ConsentClientID}, "redirect_uri": {redirect},
				"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
			if tt.acrValues != "" {
				q.Set("acr_values", tt.acrValues)
			}
			form := b.Follow(http.MethodGet, ls.url+"/oauth/authorize?"+q.Encode(), nil)
			if offered, checked := testEIDLevels(form.Body); !slices.Equal(offered, tt.offered) || checked != tt.preselected {
				t.Fatalf("offered %v with %q checked, want %v with %q: %d %s", offered, checked, tt.offered, tt.preselected, form.Status, form.Body)
			}
			v := form.HiddenFields(t)
			v.Set("national_id", "01017012345")
			v.Set("level", tt.pick)
			p := b.Post(ls.url+"/idp/login", v)
			if tt.wantACR == "" {
				if p.Status != http.StatusBadRequest || p.Location != "" || !strings.Contains(p.Body, "Pick one of the levels offered.") {
					t.Fatalf("level %q: %d %s %s", tt.pick, p.Status, p.Location, p.Body)
				}
				if offered, _ := testEIDLevels(p.Body); !slices.Equal(offered, tt.offered) {
					t.Fatalf("the form again offers %v, want %v", offered, tt.offered)
				}
				// Nothing was issued: the sign-in is still open, and completes
				// at a level offered.
				v.Set("level", tt.preselected)
				if p = b.Post(ls.url+"/idp/login", v); p.Status != http.StatusSeeOther || mustQuery(t, p.Location).Get("code") == "" {
					t.Fatalf("after a refused level, a level offered: %d %s %s", p.Status, p.Location, p.Body)
				}
				return
			}
			code := mustQuery(t, p.Location).Get("code")
			if p.Status != http.StatusSeeOther || code == "" {
				t.Fatalf("level %q: %d %s %s", tt.pick, p.Status, p.Location, p.Body)
			}
			got := exchange(t, ls, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
				"code_verifier": {verifier}, "client_id": {login.ConsentClientID},
				"client_secret": {login.BuiltInClientSecret(ls.cfg.SessionKey, login.ConsentClientID)}}, false)
			raw, _ := got.body["id_token"].(string)
			provider, err := oidc.NewProvider(context.Background(), ls.url)
			if err != nil {
				t.Fatal(err)
			}
			idToken, err := provider.Verifier(&oidc.Config{ClientID: login.ConsentClientID}).Verify(context.Background(), raw)
			if err != nil {
				t.Fatalf("ID token (%d %v): %v", got.status, got.body, err)
			}
			var claims struct {
				ACR  string `json:"acr"`
				Test bool   `json:"flowd_test_identity"`
				PID  string `json:"pid"`
			}
			if err := idToken.Claims(&claims); err != nil || claims.ACR != tt.wantACR || !claims.Test || claims.PID != "01017012345" {
				t.Fatalf("ID token claims %+v (%v), want acr %s and the test marker", claims, err, tt.wantACR)
			}
		})
	}
}
