package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/console"
	"github.com/flowd/flowd/web/internal/oidclogin"
	"github.com/flowd/flowd/web/internal/webtest"
)

func TestStaffSignInAndOutEndToEnd(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-a", "ada@example.com", staff.RoleAdmin)
	b := formbrowser.New(t)

	// Step by step: /console → sign-in → provider → form.
	p := b.Get(ls.URL + "/console")
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.URL+"/console/auth/login?return=%2Fconsole") {
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
	v.Set("password", webtest.TestPassword)
	p = b.Post(ls.URL+"/idp/login", v)
	cb, _ := url.Parse(p.Location)
	if p.Status != http.StatusSeeOther || cb.Path != "/console/auth/callback" || cb.Query().Get("state") != q.Get("state") || cb.Query().Get("code") == "" {
		t.Fatalf("after the form: %d %s", p.Status, p.Location)
	}
	p = b.Get(p.Location)
	if p.Status != http.StatusSeeOther || p.Location != ls.URL+"/console" {
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
	if p := b.Get(ls.URL + "/console"); p.Status != http.StatusSeeOther || p.Location != ls.URL+"/console/flows" {
		t.Fatalf("console home: %d %s", p.Status, p.Location)
	}
	home := b.Get(ls.URL + "/console/flows")
	if home.Status != 200 || !strings.Contains(home.Body, "Person ada@example.com") || !strings.Contains(home.Body, "org-a") ||
		!strings.Contains(home.Body, ">admin<") {
		t.Fatalf("console home: %d %s", home.Status, home.Body)
	}

	// Sign-out needs the session's CSRF token.
	if p := b.Post(ls.URL+"/console/auth/logout", url.Values{"csrf": {"forged"}}); p.Status != http.StatusForbidden {
		t.Fatalf("sign-out with a forged CSRF token: %d", p.Status)
	}
	p = b.Post(ls.URL+"/console/auth/logout", home.HiddenFields(t))
	end, _ := url.Parse(p.Location)
	if p.Status != http.StatusSeeOther || end.Path != "/oauth/end_session" || end.Query().Get("id_token_hint") == "" ||
		end.Query().Get("post_logout_redirect_uri") != ls.URL+"/console/signed-out" {
		t.Fatalf("sign-out: %d %s", p.Status, p.Location)
	}
	out := b.Follow(http.MethodGet, p.Location, nil)
	if out.URL != ls.URL+"/console/signed-out" || !strings.Contains(out.Body, "signed out") {
		t.Fatalf("after sign-out: %s %s", out.URL, out.Body)
	}
	// Both the console session and the provider's are gone: the form again.
	again := b.Follow(http.MethodGet, ls.URL+"/console", nil)
	if !strings.Contains(again.Body, `name="password"`) {
		t.Fatalf("after sign-out /console did not ask to sign in: %s", again.Body)
	}
}

func TestDisablingEndsSessions(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	if p := webtest.SignInStaff(t, b, ls.URL, "ada", webtest.TestPassword); p.Status != 200 {
		t.Fatalf("sign-in: %d", p.Status)
	}
	if _, err := ls.Staff.DisableStaff(context.Background(), "ada"); err != nil {
		t.Fatal(err)
	}
	if p := b.Get(ls.URL + "/console"); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.URL+"/console/auth/login") {
		t.Fatalf("the session of a disabled account: %d %s", p.Status, p.Location)
	}
}

func TestCallbackRefusesAWrongState(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	form := b.Follow(http.MethodGet, ls.URL+"/console", nil)
	v := form.HiddenFields(t)
	v.Set("username", "ada")
	v.Set("password", webtest.TestPassword)
	p := b.Post(ls.URL+"/idp/login", v)
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
	if p := b.Get(ls.URL + "/console"); p.Status != http.StatusSeeOther {
		t.Fatalf("a session after refused callbacks: %d", p.Status)
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
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	ls.CreateStaff(t, "org-b", "bea", staff.RoleViewer)
	ada, bea := formbrowser.New(t), formbrowser.New(t)
	a, bp := webtest.SignInStaff(t, ada, ls.URL, "ada", webtest.TestPassword), webtest.SignInStaff(t, bea, ls.URL, "bea", webtest.TestPassword)
	if !strings.Contains(a.Body, "org-a") || strings.Contains(a.Body, "org-b") || !strings.Contains(bp.Body, "org-b") || strings.Contains(bp.Body, "org-a") {
		t.Fatalf("sessions mixed organizations:\nada: %s\nbea: %s", a.Body, bp.Body)
	}

	// A relying party that receives ada's token with org-b written into it refuses it.
	tampered := webtest.SetupLogin(t, webtest.LoginOptions{ConsoleHTTP: &http.Client{Transport: tamperingTransport{from: `"org-a"`, to: `"org-b"`}}})
	tampered.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	p := webtest.SignInStaff(t, b, tampered.URL, "ada", webtest.TestPassword)
	if p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, "Sign-in failed") {
		t.Fatalf("a tampered ID token: %d %s", p.Status, p.Body)
	}
	if p := b.Get(tampered.URL + "/console"); p.Status != http.StatusSeeOther {
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
		listeners[i] = webtest.NewListener()
	}
	issuer := webtest.SetupLogin(t, webtest.LoginOptions{OrgClaim: "tenant", RolesClaim: "groups", ExtraClients: func(string) []login.Client {
		var cs []login.Client
		for i, l := range listeners {
			cs = append(cs, login.Client{ID: "external-" + string(rune('a'+i)), Name: "an external console", Secret: "external secret",
				Method: login.MethodStaff, RedirectURIs: []string{webtest.BaseOf(l) + "/console/auth/callback"},
				PostLogoutRedirectURIs: []string{webtest.BaseOf(l) + "/console/signed-out"}})
		}
		return cs
	}})
	issuer.CreateStaff(t, "tenant-7", "eve@tenant.example", staff.RoleAdmin)
	for i, r := range rps {
		t.Run(r.name, func(t *testing.T) {
			ls := webtest.SetupLogin(t, webtest.LoginOptions{Preset: listeners[i], Env: map[string]string{
				"FLOWD_CONSOLE_OIDC_ISSUER": issuer.URL, "FLOWD_CONSOLE_OIDC_CLIENT_ID": "external-" + string(rune('a'+i)),
				"FLOWD_CONSOLE_OIDC_CLIENT_SECRET": "external secret", "FLOWD_CONSOLE_ORG_CLAIM": r.orgClaim,
				"FLOWD_CONSOLE_ROLES_CLAIM": r.rolesClaim,
			}})
			b := formbrowser.New(t)
			form := b.Follow(http.MethodGet, ls.URL+"/console", nil)
			if !strings.HasPrefix(form.URL, issuer.URL+"/idp/login") {
				t.Fatalf("not sent to the external issuer: %s", form.URL)
			}
			v := form.HiddenFields(t)
			v.Set("username", "eve@tenant.example")
			v.Set("password", webtest.TestPassword)
			p := b.Follow(http.MethodPost, issuer.URL+"/idp/login", v)
			if p.Status != r.status || !strings.Contains(p.Body, r.want) {
				t.Fatalf("got %d, want %d with %q: %s", p.Status, r.status, r.want, p.Body)
			}
			if r.status != 200 {
				return
			}
			out := b.Follow(http.MethodPost, ls.URL+"/console/auth/logout", p.HiddenFields(t))
			if out.URL != ls.URL+"/console/signed-out" {
				t.Fatalf("logout at the external issuer did not come back: %s", out.URL)
			}
		})
	}
}

func TestConsoleMiddlewareChecksCSRFAndRole(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	ls.CreateStaff(t, "org-a", "vic", staff.RoleViewer)
	ls.Srv.Echo().POST("/console/test-change", func(c echo.Context) error {
		return c.String(http.StatusOK, "changed for "+console.StaffOf(c).OrganizationID)
	}, console.RequireStaffOf(oidclogin.ConsoleSessions(ls.Cfg, ls.Sessions, nil)), console.RequireAdmin)

	admin, viewer, stranger := formbrowser.New(t), formbrowser.New(t), formbrowser.New(t)
	adminHome := webtest.SignInStaff(t, admin, ls.URL, "ada", webtest.TestPassword)
	viewerHome := webtest.SignInStaff(t, viewer, ls.URL, "vic", webtest.TestPassword)
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
			p := tt.b.Post(ls.URL+"/console/test-change", tt.form)
			if p.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", p.Status, tt.status, p.Body)
			}
			if tt.status == http.StatusOK && p.Body != "changed for org-a" {
				t.Fatalf("body %q", p.Body)
			}
		})
	}
}
