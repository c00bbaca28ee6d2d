package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/oidclogin"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/login"
)

// loginServer is a real server with the built-in provider and both relying
// parties, on a fresh database, listening on its base URL.
type loginServer struct {
	url   string
	srv   *Server
	cfg   *config.Config
	staff *login.Staff
	pool  *pgxpool.Pool
	ident *identity.Module
	flows *flows.Manager
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
	ident := identity.New(pool, identity.Config{Issuer: base, Audience: cfg.Audience, KeyEncryptionKey: randomKey(t),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	staff, err := login.NewStaff(pool, nil, login.StaffConfig{PasswordParams: secrethash.Cheap, AccountLimit: 3, AddressLimit: 5})
	if err != nil {
		t.Fatal(err)
	}
	clients := login.BuiltInClients(base, cfg.SessionKey)
	if o.extraClients != nil {
		clients = append(clients, o.extraClients(base)...)
	}
	provider, err := login.New(pool, ident, staff, login.Config{Issuer: base, Clients: clients, TestEID: cfg.TestEID,
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
	flowsModule := flows.New(pool, sealer, flows.Config{NationalIDFormat: flows.FormatGeneric}, consent.NewRequests(pool, sealer, base),
		fakeOrgs{settings: defaultSettings}, &tableEvents{})
	consoleCfg := oidclogin.ConsoleConfig(cfg)
	consoleCfg.HTTPClient = o.consoleHTTP
	srv := New(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Config: cfg, Pool: pool, Registry: prometheus.NewRegistry(),
		Identity: ident, Flows: flowsModule, Login: provider, ConsoleRP: oidclogin.New(consoleCfg), ConsentRP: oidclogin.New(oidclogin.ConsentConfig(cfg))})
	hs.Config.Handler = srv
	hs.Start()
	t.Cleanup(hs.Close)
	return loginServer{url: base, srv: srv, cfg: cfg, staff: staff, pool: pool, ident: ident, flows: flowsModule}
}

func randomKey(t *testing.T) []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

const testPassword = "correct horse battery staple"

func (ls loginServer) createStaff(t *testing.T, org, username string, role identity.Role) identity.StaffAccount {
	t.Helper()
	a, err := ls.staff.CreateStaff(context.Background(), identity.NewStaffAccount{OrganizationID: org, Username: username,
		Name: "Person " + username, Role: role, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// browser is a cookie-keeping client that does not follow redirects by
// itself, so that every hop can be looked at.
type browser struct {
	t      *testing.T
	client *http.Client
	// acceptLanguage, when set, is sent as Accept-Language.
	acceptLanguage string
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status   int
	location string
	body     string
	url      string
	header   http.Header
}

func (b *browser) do(method, u string, form url.Values) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if b.acceptLanguage != "" {
		req.Header.Set("Accept-Language", b.acceptLanguage)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	p := page{status: resp.StatusCode, body: string(raw), url: u, header: resp.Header}
	if loc := resp.Header.Get("Location"); loc != "" {
		l, err := req.URL.Parse(loc)
		if err != nil {
			b.t.Fatal(err)
		}
		p.location = l.String()
	}
	return p
}

// follow requests u and follows redirects until a page that is not one.
func (b *browser) follow(method, u string, form url.Values) page {
	b.t.Helper()
	p := b.do(method, u, form)
	for i := 0; p.status >= 300 && p.status < 400; i++ {
		if i > 10 {
			b.t.Fatalf("redirect loop at %s", p.location)
		}
		p = b.do(http.MethodGet, p.location, nil)
	}
	return p
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)"`)

// formFields returns the hidden fields of a page's form.
func formFields(t *testing.T, p page) url.Values {
	t.Helper()
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(p.body, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	if len(v) == 0 {
		t.Fatalf("no form on %s (%d): %s", p.url, p.status, p.body)
	}
	return v
}

// signIn drives a console sign-in through the staff form and returns the
// page the browser lands on.
func (b *browser) signInStaff(base, username, password string) page {
	b.t.Helper()
	form := b.follow(http.MethodGet, base+"/console", nil)
	if !strings.Contains(form.body, `name="password"`) {
		b.t.Fatalf("no staff sign-in form: %d %s", form.status, form.body)
	}
	v := formFields(b.t, form)
	v.Set("username", username)
	v.Set("password", password)
	return b.follow(http.MethodPost, base+"/idp/login", v)
}

func TestStaffSignInAndOutEndToEnd(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada@example.com", identity.RoleAdmin)
	b := newBrowser(t)

	// Step by step: /console → sign-in → provider → form.
	p := b.do(http.MethodGet, ls.url+"/console", nil)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, ls.url+"/console/auth/login?return=%2Fconsole") {
		t.Fatalf("/console without a session: %d %s", p.status, p.location)
	}
	p = b.do(http.MethodGet, p.location, nil)
	auth, _ := url.Parse(p.location)
	q := auth.Query()
	if auth.Path != "/oauth/authorize" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("state") == "" || q.Get("nonce") == "" || q.Get("client_id") != login.ConsoleClientID {
		t.Fatalf("authorization request: %s", p.location)
	}
	form := b.follow(http.MethodGet, p.location, nil)
	if form.status != 200 || !strings.Contains(form.body, "Username or e-mail") || strings.Contains(form.body, "<script") {
		t.Fatalf("sign-in form: %d %s", form.status, form.body)
	}
	v := formFields(t, form)
	v.Set("username", "ADA@example.com")
	v.Set("password", testPassword)
	p = b.do(http.MethodPost, ls.url+"/idp/login", v)
	cb, _ := url.Parse(p.location)
	if p.status != http.StatusSeeOther || cb.Path != "/console/auth/callback" || cb.Query().Get("state") != q.Get("state") || cb.Query().Get("code") == "" {
		t.Fatalf("after the form: %d %s", p.status, p.location)
	}
	p = b.do(http.MethodGet, p.location, nil)
	if p.status != http.StatusSeeOther || p.location != ls.url+"/console" {
		t.Fatalf("callback: %d %s %s", p.status, p.location, p.body)
	}
	var sessionCookie string
	for _, c := range p.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "flowd_console=") {
			sessionCookie = c
		}
	}
	if !strings.Contains(sessionCookie, "HttpOnly") || !strings.Contains(sessionCookie, "SameSite=Lax") || strings.Contains(sessionCookie, "Secure") {
		t.Fatalf("console cookie flags under http: %q", sessionCookie)
	}
	if p := b.do(http.MethodGet, ls.url+"/console", nil); p.status != http.StatusSeeOther || p.location != ls.url+"/console/flows" {
		t.Fatalf("console home: %d %s", p.status, p.location)
	}
	home := b.do(http.MethodGet, ls.url+"/console/flows", nil)
	if home.status != 200 || !strings.Contains(home.body, "Person ada@example.com") || !strings.Contains(home.body, "org-a") ||
		!strings.Contains(home.body, ">admin<") {
		t.Fatalf("console home: %d %s", home.status, home.body)
	}

	// Sign-out needs the session's CSRF token.
	if p := b.do(http.MethodPost, ls.url+"/console/auth/logout", url.Values{"csrf": {"forged"}}); p.status != http.StatusForbidden {
		t.Fatalf("sign-out with a forged CSRF token: %d", p.status)
	}
	p = b.do(http.MethodPost, ls.url+"/console/auth/logout", formFields(t, home))
	end, _ := url.Parse(p.location)
	if p.status != http.StatusSeeOther || end.Path != "/oauth/end_session" || end.Query().Get("id_token_hint") == "" ||
		end.Query().Get("post_logout_redirect_uri") != ls.url+"/console/signed-out" {
		t.Fatalf("sign-out: %d %s", p.status, p.location)
	}
	out := b.follow(http.MethodGet, p.location, nil)
	if out.url != ls.url+"/console/signed-out" || !strings.Contains(out.body, "signed out") {
		t.Fatalf("after sign-out: %s %s", out.url, out.body)
	}
	// Both the console session and the provider's are gone: the form again.
	again := b.follow(http.MethodGet, ls.url+"/console", nil)
	if !strings.Contains(again.body, `name="password"`) {
		t.Fatalf("after sign-out /console did not ask to sign in: %s", again.body)
	}
}

func TestProviderSessionSignsInAgainWithoutTheForm(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", identity.RoleViewer)
	ls.createStaff(t, "org-a", "bob", identity.RoleViewer)
	b := newBrowser(t)
	if p := b.signInStaff(ls.url, "ada", testPassword); !strings.Contains(p.body, ">viewer<") {
		t.Fatalf("sign-in: %s", p.body)
	}
	// The console session alone is dropped (as when it times out): the
	// provider still knows the browser and signs it in without a form.
	for _, u := range []string{ls.url} {
		parsed, _ := url.Parse(u)
		b.client.Jar.SetCookies(parsed, []*http.Cookie{{Name: "flowd_console", Value: "", MaxAge: -1, Path: "/"}})
	}
	if p := b.follow(http.MethodGet, ls.url+"/console", nil); !strings.Contains(p.body, "Person ada") {
		t.Fatalf("single sign-on: %s", p.body)
	}
	// A disabled account loses that too.
	if _, err := ls.staff.DisableStaff(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	parsed, _ := url.Parse(ls.url)
	b.client.Jar.SetCookies(parsed, []*http.Cookie{{Name: "flowd_console", Value: "", MaxAge: -1, Path: "/"}})
	p := b.follow(http.MethodGet, ls.url+"/console", nil)
	if !strings.Contains(p.body, `name="password"`) {
		t.Fatalf("a disabled account was signed in by its provider session: %s", p.body)
	}
}

func TestDisabledAccountCannotSignIn(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", identity.RoleAdmin)
	if _, err := ls.staff.DisableStaff(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	p := b.signInStaff(ls.url, "ada", testPassword)
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "The username or password is not right.") {
		t.Fatalf("disabled account: %d %s", p.status, p.body)
	}
	if p := b.do(http.MethodGet, ls.url+"/console", nil); p.status != http.StatusSeeOther {
		t.Fatalf("a disabled account got a session: %d", p.status)
	}
}

func TestDisablingEndsSessions(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", identity.RoleAdmin)
	b := newBrowser(t)
	if p := b.signInStaff(ls.url, "ada", testPassword); p.status != 200 {
		t.Fatalf("sign-in: %d", p.status)
	}
	if _, err := ls.staff.DisableStaff(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	if p := b.do(http.MethodGet, ls.url+"/console", nil); p.status != http.StatusForbidden || !strings.Contains(p.body, "disabled") {
		t.Fatalf("the session of a disabled account: %d %s", p.status, p.body)
	}
}

func TestWrongCredentialsLookAlikeAndGuessingIsLimited(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{}) // 3 failures per account, 5 per address
	ls.createStaff(t, "org-a", "ada", identity.RoleAdmin)
	ls.createStaff(t, "org-a", "cy", identity.RoleAdmin)
	b := newBrowser(t)

	wrongPassword := b.signInStaff(ls.url, "ada", "not the password at all")
	unknownUser := b.signInStaff(ls.url, "nobody", testPassword)
	msgRE := regexp.MustCompile(`role="alert">([^<]*)<`)
	if wrongPassword.status != http.StatusUnauthorized || unknownUser.status != wrongPassword.status ||
		msgRE.FindString(wrongPassword.body) == "" || msgRE.FindString(wrongPassword.body) != msgRE.FindString(unknownUser.body) {
		t.Fatalf("wrong password and unknown user answer differently:\n%d %s\n%d %s", wrongPassword.status,
			msgRE.FindString(wrongPassword.body), unknownUser.status, msgRE.FindString(unknownUser.body))
	}
	// Two more failures for ada make three: her account pauses, even for the right password.
	for range 2 {
		if p := b.signInStaff(ls.url, "ada", "still not the password"); p.status != http.StatusUnauthorized {
			t.Fatalf("failure: %d", p.status)
		}
	}
	p := b.signInStaff(ls.url, "ada", testPassword)
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" || !strings.Contains(p.body, "Too many failed attempts") {
		t.Fatalf("fourth attempt for a paused account: %d %q %s", p.status, p.header.Get("Retry-After"), p.body)
	}
	// cy's account is fine until the address reaches five failures (four so far).
	if p := b.signInStaff(ls.url, "cy", "wrong for cy too"); p.status != http.StatusUnauthorized {
		t.Fatalf("cy's failure: %d", p.status)
	}
	if p := b.signInStaff(ls.url, "cy", testPassword); p.status != http.StatusTooManyRequests {
		t.Fatalf("the address is over its limit, yet: %d %s", p.status, p.body)
	}
}

func TestTestEIDSignIn(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.srv.Echo().GET("/consent/test-whoami", func(c echo.Context) error {
		id, ok := ls.srv.consentIdentityOf(c)
		if !ok {
			return c.String(http.StatusUnauthorized, "nobody")
		}
		return c.JSON(http.StatusOK, id)
	})
	b := newBrowser(t)
	form := b.follow(http.MethodGet, ls.url+"/consent/auth/login?return=%2Fconsent%2Ftest-whoami", nil)
	if form.status != 200 || !strings.Contains(form.body, "TEST identity provider") || !strings.Contains(form.body, `name="national_id"`) {
		t.Fatalf("test eID page: %d %s", form.status, form.body)
	}
	v := formFields(t, form)
	v.Set("national_id", "12 34")
	if p := b.do(http.MethodPost, ls.url+"/idp/login", v); p.status != http.StatusBadRequest || !strings.Contains(p.body, "1 to 64 letters") {
		t.Fatalf("a malformed national id: %d %s", p.status, p.body)
	}
	v.Set("national_id", "01017012345")
	p := b.follow(http.MethodPost, ls.url+"/idp/login", v)
	var id ConsentIdentity
	if err := json.Unmarshal([]byte(p.body), &id); err != nil || id.NationalID != "01017012345" || !id.TestIdentity ||
		id.CSRF == "" || strings.Contains(id.Subject, "01017012345") {
		t.Fatalf("consent identity: %s (%v)", p.body, err)
	}
	// An open redirect is not possible through return.
	p = b.do(http.MethodGet, ls.url+"/consent/auth/login?return=https%3A%2F%2Fevil.example%2F", nil)
	if p.status != http.StatusSeeOther {
		t.Fatalf("login with a foreign return: %d", p.status)
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
			b := newBrowser(t)
			b.acceptLanguage = tt.acceptLanguage
			if tt.cookie != "" {
				u, _ := url.Parse(ls.url)
				b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "flowd_lang", Value: tt.cookie, Path: "/"}})
			}
			p := b.do(http.MethodGet, ls.url+tt.start, nil)
			if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, ls.url+"/oauth/authorize?") {
				t.Fatalf("not sent to the provider: %d %s", p.status, p.location)
			}
			if got := mustQuery(t, p.location)["ui_locales"]; len(got) != 1 || got[0] != tt.want {
				t.Fatalf("ui_locales = %q, want %q (%s)", got, tt.want, p.location)
			}
			// The test eID follows ui_locales, not its own guess: with the
			// cookie gone, only ui_locales can carry a switched language.
			u, _ := url.Parse(ls.url)
			b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "flowd_lang", Value: "", Path: "/", MaxAge: -1}})
			form := b.follow(http.MethodGet, p.location, nil)
			if form.status != http.StatusOK || !strings.Contains(form.body, `<html lang="`+tt.lang+`"`) {
				t.Fatalf("test eID page, want lang %s: %d %s", tt.lang, form.status, form.body)
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
	check := func(t *testing.T, p page, want texts, status int, withError bool) {
		t.Helper()
		if p.status != status || !strings.Contains(p.body, `<html lang="`+want.lang+`"`) || !strings.Contains(p.body, want.label) ||
			strings.Contains(p.body, want.error) != withError {
			t.Fatalf("want %s (error shown: %v), got %d:\n%s", want.lang, withError, p.status, p.body)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBrowser(t)
			b.acceptLanguage = tt.acceptLanguage
			_, challenge := pkcePair()
			q := url.Values{"response_type": {"code"}, "client_id": {login.ConsentClientID}, "redirect_uri": {ls.url + "/consent/auth/callback"},
				"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
			if tt.uiLocales != "" {
				q.Set("ui_locales", tt.uiLocales)
			}
			form := b.follow(http.MethodGet, ls.url+"/oauth/authorize?"+q.Encode(), nil)
			check(t, form, tt.want, http.StatusOK, false)

			v := formFields(t, form)
			v.Set("national_id", "not a national id")
			check(t, b.do(http.MethodPost, ls.url+"/idp/login", v), tt.want, http.StatusBadRequest, true)
		})
	}

	t.Run("the form's switch wins and holds through the POST", func(t *testing.T) {
		t.Parallel()
		b := newBrowser(t)
		_, challenge := pkcePair()
		q := url.Values{"response_type": {"code"}, "client_id": {login.ConsentClientID}, "redirect_uri": {ls.url + "/consent/auth/callback"},
			"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
			"ui_locales": {"nb"}}
		form := b.follow(http.MethodGet, ls.url+"/oauth/authorize?"+q.Encode(), nil)
		check(t, form, norwegian, http.StatusOK, false)
		m := regexp.MustCompile(`class="lang-switch" href="([^"]+)"`).FindStringSubmatch(form.body)
		if m == nil {
			t.Fatalf("no language switch: %s", form.body)
		}
		switched := b.do(http.MethodGet, ls.url+html.UnescapeString(m[1]), nil)
		check(t, switched, english, http.StatusOK, false)
		// The switch is remembered (the cookie) but the POST holds its
		// language by itself: with the cookie gone and a Norwegian
		// browser, the error is still in English.
		u, _ := url.Parse(ls.url)
		b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "flowd_lang", Value: "", Path: "/", MaxAge: -1}})
		b.acceptLanguage = "nb"
		v := formFields(t, switched)
		v.Set("national_id", "")
		check(t, b.do(http.MethodPost, ls.url+"/idp/login", v), english, http.StatusBadRequest, true)
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
		id, ok := ls.srv.consentIdentityOf(c)
		if !ok {
			return c.String(http.StatusUnauthorized, "nobody")
		}
		return c.JSON(http.StatusOK, id)
	})
	b := newBrowser(t)
	b.acceptLanguage = "nb-NO,nb;q=0.9"
	start := b.do(http.MethodGet, ls.url+"/consent/auth/login?return=%2Fconsent%2Ftest-whoami", nil)
	if !strings.HasPrefix(start.location, issuer.url+"/oauth/authorize?") || mustQuery(t, start.location).Get("ui_locales") != "nb en" {
		t.Fatalf("the external eID is not asked for the page language: %s", start.location)
	}
	form := b.follow(http.MethodGet, start.location, nil)
	if !strings.HasPrefix(form.url, issuer.url+"/idp/login") || !strings.Contains(form.body, `<html lang="nb"`) {
		t.Fatalf("not sent to the external eID, or not in Norwegian: %s %s", form.url, form.body)
	}
	v := formFields(t, form)
	v.Set("national_id", "19850101-1234")
	p := b.follow(http.MethodPost, issuer.url+"/idp/login", v)
	var id ConsentIdentity
	if err := json.Unmarshal([]byte(p.body), &id); err != nil || id.NationalID != "19850101-1234" || id.Issuer != issuer.url {
		t.Fatalf("consent identity through the external eID: %s (%v)", p.body, err)
	}
}

func TestTestEIDOffIsRefused(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{env: map[string]string{"FLOWD_TEST_EID": "false"}})
	b := newBrowser(t)
	p := b.follow(http.MethodGet, ls.url+"/consent/auth/login?return=%2Fconsent%2Fx", nil)
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "access_denied") {
		t.Fatalf("test eID while off: %d %s", p.status, p.body)
	}
}

func TestCallbackRefusesAWrongState(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", identity.RoleAdmin)
	b := newBrowser(t)
	form := b.follow(http.MethodGet, ls.url+"/console", nil)
	v := formFields(t, form)
	v.Set("username", "ada")
	v.Set("password", testPassword)
	p := b.do(http.MethodPost, ls.url+"/idp/login", v)
	cb, _ := url.Parse(p.location)
	q := cb.Query()
	q.Set("state", "forged-"+q.Get("state"))
	cb.RawQuery = q.Encode()
	if p := b.do(http.MethodGet, cb.String(), nil); p.status != http.StatusBadRequest || !strings.Contains(p.body, "Sign-in expired") {
		t.Fatalf("callback with a wrong state: %d %s", p.status, p.body)
	}
	// And from another browser, the right state is as unknown.
	other := newBrowser(t)
	if p2 := other.do(http.MethodGet, p.location, nil); p2.status != http.StatusBadRequest {
		t.Fatalf("callback in another browser: %d", p2.status)
	}
	if p := b.do(http.MethodGet, ls.url+"/console", nil); p.status != http.StatusSeeOther {
		t.Fatalf("a session after refused callbacks: %d", p.status)
	}
}

func TestSignInFormIsBoundToItsBrowser(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", identity.RoleAdmin)
	victim, attacker := newBrowser(t), newBrowser(t)
	form := attacker.follow(http.MethodGet, ls.url+"/console", nil)
	v := formFields(t, form)
	v.Set("username", "ada")
	v.Set("password", testPassword)
	// Posting the attacker's form from the victim's browser (login CSRF) fails.
	if p := victim.do(http.MethodPost, ls.url+"/idp/login", v); p.status != http.StatusBadRequest || !strings.Contains(p.body, "expired") {
		t.Fatalf("a form posted from another browser: %d %s", p.status, p.body)
	}
	// So does a wrong CSRF token in the right browser.
	v.Set("csrf", "forged")
	if p := attacker.do(http.MethodPost, ls.url+"/idp/login", v); p.status != http.StatusBadRequest {
		t.Fatalf("a forged form token: %d", p.status)
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
	b := newBrowser(t)
	q := url.Values{"response_type": {"code"}, "client_id": {login.ConsoleClientID}, "redirect_uri": {ls.url + "/console/auth/callback"},
		"scope": {"openid profile"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	form := b.follow(http.MethodGet, ls.url+"/oauth/authorize?"+q.Encode(), nil)
	v := formFields(t, form)
	v.Set("username", "ada")
	v.Set("password", testPassword)
	p := b.do(http.MethodPost, ls.url+"/idp/login", v)
	cq := mustQuery(t, p.location)
	if cq.Get("state") != "st" || cq.Get("iss") != ls.url || cq.Get("code") == "" {
		t.Fatalf("redirect with the code: %s", p.location)
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
	ls.createStaff(t, "org-a", "ada", identity.RoleAdmin)
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
			p := newBrowser(t).do(http.MethodGet, ls.url+"/oauth/authorize?"+q.Encode(), nil)
			if tt.error == "" {
				if p.status != http.StatusBadRequest || p.location != "" || !strings.Contains(p.body, "Sign-in request refused") {
					t.Fatalf("want an error page without redirect, got %d %q", p.status, p.location)
				}
				return
			}
			rq := mustQuery(t, p.location)
			if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, ls.url+"/console/auth/callback?") ||
				rq.Get("error") != tt.error || rq.Get("state") != "st" {
				t.Fatalf("want %s back at the client, got %d %s", tt.error, p.status, p.location)
			}
		})
	}
}

func TestEndSessionRefusesUnregisteredReturn(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	b := newBrowser(t)
	q := url.Values{"client_id": {login.ConsoleClientID}, "post_logout_redirect_uri": {"https://evil.example/"}}
	if p := b.do(http.MethodGet, ls.url+"/oauth/end_session?"+q.Encode(), nil); p.status != http.StatusBadRequest || p.location != "" {
		t.Fatalf("unregistered post-logout address: %d %s", p.status, p.location)
	}
	q.Set("post_logout_redirect_uri", ls.url+"/console/signed-out")
	q.Set("state", "s1")
	if p := b.do(http.MethodGet, ls.url+"/oauth/end_session?"+q.Encode(), nil); p.status != http.StatusSeeOther || p.location != ls.url+"/console/signed-out?state=s1" {
		t.Fatalf("registered post-logout address: %d %s", p.status, p.location)
	}
	q.Set("id_token_hint", "eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
	if p := b.do(http.MethodGet, ls.url+"/oauth/end_session?"+q.Encode(), nil); p.status != http.StatusBadRequest {
		t.Fatalf("a forged id_token_hint: %d %s", p.status, p.location)
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
	ls.createStaff(t, "org-a", "ada", identity.RoleAdmin)
	ls.createStaff(t, "org-b", "bea", identity.RoleViewer)
	ada, bea := newBrowser(t), newBrowser(t)
	a, bp := ada.signInStaff(ls.url, "ada", testPassword), bea.signInStaff(ls.url, "bea", testPassword)
	if !strings.Contains(a.body, "org-a") || strings.Contains(a.body, "org-b") || !strings.Contains(bp.body, "org-b") || strings.Contains(bp.body, "org-a") {
		t.Fatalf("sessions mixed organizations:\nada: %s\nbea: %s", a.body, bp.body)
	}

	// A relying party that receives ada's token with org-b written into it refuses it.
	tampered := setupLogin(t, loginOptions{consoleHTTP: &http.Client{Transport: tamperingTransport{from: `"org-a"`, to: `"org-b"`}}})
	tampered.createStaff(t, "org-a", "ada", identity.RoleAdmin)
	b := newBrowser(t)
	p := b.signInStaff(tampered.url, "ada", testPassword)
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "Sign-in failed") {
		t.Fatalf("a tampered ID token: %d %s", p.status, p.body)
	}
	if p := b.do(http.MethodGet, tampered.url+"/console", nil); p.status != http.StatusSeeOther {
		t.Fatalf("a tampered ID token gave a session: %d %s", p.status, p.body)
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
	issuer.createStaff(t, "tenant-7", "eve@tenant.example", identity.RoleAdmin)
	for i, r := range rps {
		t.Run(r.name, func(t *testing.T) {
			ls := setupLogin(t, loginOptions{preset: listeners[i], env: map[string]string{
				"FLOWD_CONSOLE_OIDC_ISSUER": issuer.url, "FLOWD_CONSOLE_OIDC_CLIENT_ID": "external-" + string(rune('a'+i)),
				"FLOWD_CONSOLE_OIDC_CLIENT_SECRET": "external secret", "FLOWD_CONSOLE_ORG_CLAIM": r.orgClaim,
				"FLOWD_CONSOLE_ROLES_CLAIM": r.rolesClaim,
			}})
			b := newBrowser(t)
			form := b.follow(http.MethodGet, ls.url+"/console", nil)
			if !strings.HasPrefix(form.url, issuer.url+"/idp/login") {
				t.Fatalf("not sent to the external issuer: %s", form.url)
			}
			v := formFields(t, form)
			v.Set("username", "eve@tenant.example")
			v.Set("password", testPassword)
			p := b.follow(http.MethodPost, issuer.url+"/idp/login", v)
			if p.status != r.status || !strings.Contains(p.body, r.want) {
				t.Fatalf("got %d, want %d with %q: %s", p.status, r.status, r.want, p.body)
			}
			if r.status != 200 {
				return
			}
			out := b.follow(http.MethodPost, ls.url+"/console/auth/logout", formFields(t, p))
			if out.url != ls.url+"/console/signed-out" {
				t.Fatalf("logout at the external issuer did not come back: %s", out.url)
			}
		})
	}
}

func TestConsoleMiddlewareChecksCSRFAndRole(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-a", "ada", identity.RoleAdmin)
	ls.createStaff(t, "org-a", "vic", identity.RoleViewer)
	ls.srv.Echo().POST("/console/test-change", func(c echo.Context) error {
		return c.String(http.StatusOK, "changed for "+staffOf(c).OrganizationID)
	}, ls.srv.requireStaff, requireAdmin)

	admin, viewer, stranger := newBrowser(t), newBrowser(t), newBrowser(t)
	adminHome := admin.signInStaff(ls.url, "ada", testPassword)
	viewerHome := viewer.signInStaff(ls.url, "vic", testPassword)
	tests := []struct {
		name   string
		b      *browser
		form   url.Values
		status int
	}{
		{"admin with the token", admin, formFields(t, adminHome), http.StatusOK},
		{"admin without the token", admin, url.Values{}, http.StatusForbidden},
		{"admin with the viewer's token", admin, formFields(t, viewerHome), http.StatusForbidden},
		{"viewer with the token", viewer, formFields(t, viewerHome), http.StatusForbidden},
		{"no session", stranger, formFields(t, adminHome), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.b.do(http.MethodPost, ls.url+"/console/test-change", tt.form)
			if p.status != tt.status {
				t.Fatalf("status %d, want %d: %s", p.status, tt.status, p.body)
			}
			if tt.status == http.StatusOK && p.body != "changed for org-a" {
				t.Fatalf("body %q", p.body)
			}
		})
	}
}
