package web

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/formbrowser"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
)

// copyCookies returns a fresh browser holding copies of from's cookies
// named names, as someone who copied them out of the browser would.
func copyCookies(t *testing.T, from *formbrowser.Browser, base string, names ...string) *formbrowser.Browser {
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

// consoleAdmits reports whether a browser's console session admits a page:
// 200, where a refused one is sent to sign-in.
func consoleAdmits(t *testing.T, b *formbrowser.Browser, base string) bool {
	t.Helper()
	p := b.Get(base + "/console/flows")
	switch {
	case p.Status == http.StatusOK:
		return true
	case p.Status == http.StatusSeeOther && strings.HasPrefix(p.Location, base+"/console/auth/login"):
		return false
	}
	t.Fatalf("GET /console/flows: %d %s", p.Status, p.Location)
	return false
}

// providerSignsIn reports whether a browser's provider session signs it in to
// the console without the password.
func providerSignsIn(t *testing.T, b *formbrowser.Browser, base string) bool {
	t.Helper()
	p := b.Follow(http.MethodGet, base+"/console", nil)
	switch {
	case strings.Contains(p.Body, `name="password"`):
		return false
	case p.Status == http.StatusOK && strings.Contains(p.Body, "Sign out"):
		return true
	}
	t.Fatalf("GET /console with the provider's cookie: %d %s %s", p.Status, p.URL, p.Body)
	return false
}

// TestCopiedCookiesDoNotOutliveTheEndOfTheirSession: copies of the console's
// and the provider's cookies work while their session lives, and are
// refused once it ends, however it ends: a page goes to sign-in, a POST is
// 401, and the provider asks for the password again.
func TestCopiedCookiesDoNotOutliveTheEndOfTheirSession(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ctx := context.Background()
	ends := []struct {
		name string
		end  func(t *testing.T, b *formbrowser.Browser, username, csrf string)
	}{
		{"sign-out", func(t *testing.T, b *formbrowser.Browser, _, csrf string) {
			if p := b.Follow(http.MethodPost, ls.url+"/console/auth/logout", url.Values{"csrf": {csrf}}); p.URL != ls.url+"/console/signed-out" {
				t.Fatalf("sign-out ended at %s", p.URL)
			}
		}},
		{"password reset", func(t *testing.T, _ *formbrowser.Browser, username, _ string) {
			if _, err := ls.staff.ResetStaffPassword(ctx, username, "another correct horse battery"); err != nil {
				t.Fatal(err)
			}
		}},
		{"role change", func(t *testing.T, _ *formbrowser.Browser, username, _ string) {
			if ch, err := ls.staff.SetStaffRole(ctx, username, staff.RoleViewer); err != nil || len(ch.Ended) == 0 {
				t.Fatalf("role change: %v, ended %d sessions", err, len(ch.Ended))
			}
		}},
		{"disable", func(t *testing.T, _ *formbrowser.Browser, username, _ string) {
			if _, err := ls.staff.DisableStaff(ctx, username); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete", func(t *testing.T, _ *formbrowser.Browser, username, _ string) {
			if _, err := ls.staff.DeleteStaff(ctx, username); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for i, tt := range ends {
		t.Run(tt.name, func(t *testing.T) {
			username := "ada" + string(rune('a'+i))
			ls.createStaff(t, "org-a", username, staff.RoleAdmin)
			b := formbrowser.New(t)
			csrf := signInStaff(t, b, ls.url, username, testPassword).HiddenFields(t).Get("csrf")
			consoleCopy := copyCookies(t, b, ls.url, "flowd_console")
			providerCopy := copyCookies(t, b, ls.url, "flowd_idp")
			if !consoleAdmits(t, consoleCopy, ls.url) || !providerSignsIn(t, providerCopy, ls.url) {
				t.Fatal("the copies did not work while the session lived")
			}

			tt.end(t, b, username, csrf)

			if consoleAdmits(t, consoleCopy, ls.url) {
				t.Fatal("the copied console cookie still opens the console")
			}
			p := consoleCopy.Post(ls.url+"/console/settings", url.Values{"csrf": {csrf}, "reference_prefix": {"PWNED"}})
			if p.Status != http.StatusUnauthorized {
				t.Fatalf("a POST with the copied console cookie: %d %s", p.Status, p.Location)
			}
			if providerSignsIn(t, providerCopy, ls.url) {
				t.Fatal("the copied provider cookie still signs in without the password")
			}
			if consoleAdmits(t, b, ls.url) {
				t.Fatal("the browser itself is still signed in")
			}
		})
	}
}

// TestSignOutIsAudited: a sign-out is in the organization's audit log, once
// for the console session and once for the provider session it ended.
func TestSignOutIsAudited(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-audit", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	csrf := signInStaff(t, b, ls.url, "ada", testPassword).HiddenFields(t).Get("csrf")
	b.Follow(http.MethodPost, ls.url+"/console/auth/logout", url.Values{"csrf": {csrf}})
	entries, _, err := ls.ident.AuditLog(context.Background(), "org-audit", 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range entries {
		if e.Action != identity.AuditSessionSignOut || e.Actor != "staff:ada" || e.Target != "ada" {
			t.Fatalf("unexpected entry %+v", e)
		}
		kind, _, _ := strings.Cut(e.Detail, " ")
		kinds = append(kinds, kind)
	}
	slices.Sort(kinds)
	if !slices.Equal(kinds, []string{"console", "provider"}) {
		t.Fatalf("sign-out entries of kinds %v, want console and provider: %+v", kinds, entries)
	}
}

// testClock is a clock the test moves; the server's goroutines read it.
type testClock struct{ nanos atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.nanos.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.nanos.Load()) }
func (c *testClock) advance(d time.Duration) { c.nanos.Add(int64(d)) }

// TestSessionLifetimesHoldAtTheConsoleAndTheProvider: FLOWD_CONSOLE_SESSION_IDLE
// and _MAX end the console's session and the provider's alike, so that once
// a console session times out, signing in again takes the password, however
// much the session was used.
func TestSessionLifetimesHoldAtTheConsoleAndTheProvider(t *testing.T) {
	t.Parallel()
	clk := newTestClock()
	ls := setupLogin(t, loginOptions{now: clk.Now, env: map[string]string{
		"FLOWD_CONSOLE_SESSION_IDLE": "30m", "FLOWD_CONSOLE_SESSION_MAX": "1h"}})
	ls.createStaff(t, "org-a", "ada", staff.RoleAdmin)

	t.Run("absolute", func(t *testing.T) {
		b := formbrowser.New(t)
		signInStaff(t, b, ls.url, "ada", testPassword)
		consoleCopy := copyCookies(t, b, ls.url, "flowd_console", "flowd_idp")
		for range 3 { // in use all along: 19, 38, 57 minutes
			clk.advance(19 * time.Minute)
			if !consoleAdmits(t, b, ls.url) {
				t.Fatalf("the session ended while in use, before its maximum")
			}
		}
		clk.advance(4 * time.Minute)
		if consoleAdmits(t, consoleCopy, ls.url) || consoleAdmits(t, b, ls.url) {
			t.Fatal("the console session outlived FLOWD_CONSOLE_SESSION_MAX")
		}
		if providerSignsIn(t, b, ls.url) {
			t.Fatal("the provider signed the browser in again past FLOWD_CONSOLE_SESSION_MAX")
		}
	})
	t.Run("idle", func(t *testing.T) {
		b := formbrowser.New(t)
		signInStaff(t, b, ls.url, "ada", testPassword)
		clk.advance(31 * time.Minute)
		if consoleAdmits(t, b, ls.url) {
			t.Fatal("the console session outlived FLOWD_CONSOLE_SESSION_IDLE")
		}
		if providerSignsIn(t, b, ls.url) {
			t.Fatal("the provider signed the browser in again after FLOWD_CONSOLE_SESSION_IDLE unused")
		}
	})
	t.Run("swept", func(t *testing.T) {
		b := formbrowser.New(t)
		signInStaff(t, b, ls.url, "ada", testPassword)
		if _, err := ls.sessions.SweepExpired(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !consoleAdmits(t, b, ls.url) {
			t.Fatal("the sweep ended a live session")
		}
		clk.advance(2 * time.Hour)
		n, err := ls.sessions.SweepExpired(context.Background())
		if err != nil || n < 2 {
			t.Fatalf("the sweep deleted %d timed-out sessions (%v), want at least this browser's two", n, err)
		}
		var left int
		if err := ls.pool.QueryRow(context.Background(), `select count(*) from login_sessions`).Scan(&left); err != nil || left != 0 {
			t.Fatalf("%d sessions left after the sweep (%v)", left, err)
		}
	})
}

// sessionIDs are the ids of the sessions a sessions page lists, in order.
var sessionRowRE = regexp.MustCompile(`data-session="([^"]+)"`)

func sessionIDs(body string) []string {
	var ids []string
	for _, m := range sessionRowRE.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestAdminEndsAPersonsSession: an admin sees everyone's sessions and ends
// one: that browser is signed out at the console and at the provider, and
// the audit log says who ended it. A viewer sees only their own sessions and
// may end no one else's; another organization's admin finds none.
func TestAdminEndsAPersonsSession(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	pair := ls.signInStaffPair(t, "Test Bank", "TB")
	ls.createStaff(t, pair.other.ID, "oscar", staff.RoleAdmin)
	oscar := formbrowser.New(t)
	oscarCSRF := signInStaff(t, oscar, ls.url, "oscar", testPassword).HiddenFields(t).Get("csrf")

	page := pair.admin.Get(ls.url + "/console/sessions")
	if page.Status != http.StatusOK || !strings.Contains(page.Body, "Everyone's sessions") || !strings.Contains(page.Body, "vic") {
		t.Fatalf("the admin's sessions page: %d %s", page.Status, page.Body)
	}
	ctx := context.Background()
	vicSessions, err := ls.sessions.ListSessions(ctx, pair.org.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var vicConsole, adaConsole string
	for _, s := range vicSessions {
		if s.Kind == staff.SessionConsole && s.Username == "vic" {
			vicConsole = s.ID
		}
		if s.Kind == staff.SessionConsole && s.Username == "ada" {
			adaConsole = s.ID
		}
	}
	if vicConsole == "" || adaConsole == "" || !slices.Contains(sessionIDs(page.Body), vicConsole) {
		t.Fatalf("vic's console session %q is not listed: %v", vicConsole, sessionIDs(page.Body))
	}

	viewerPage := pair.viewer.Get(ls.url + "/console/sessions")
	if strings.Contains(viewerPage.Body, "Everyone's sessions") || slices.Contains(sessionIDs(viewerPage.Body), adaConsole) {
		t.Fatalf("a viewer sees others' sessions: %s", viewerPage.Body)
	}
	refusals := []struct {
		name   string
		b      *formbrowser.Browser
		path   string
		csrf   string
		status int
	}{
		{"a viewer ends an admin's session", pair.viewer, "/console/sessions/" + adaConsole + "/end", pair.viewerCSRF, http.StatusNotFound},
		{"a viewer ends all of an admin's", pair.viewer, "/console/sessions/" + adaConsole + "/end-all", pair.viewerCSRF, http.StatusForbidden},
		{"another organization's admin", oscar, "/console/sessions/" + vicConsole + "/end", oscarCSRF, http.StatusNotFound},
		{"a malformed id", pair.admin, "/console/sessions/not-a-session/end", pair.adminCSRF, http.StatusNotFound},
	}
	for _, r := range refusals {
		if p := r.b.Post(ls.url+r.path, url.Values{"csrf": {r.csrf}}); p.Status != r.status {
			t.Fatalf("%s: %d, want %d", r.name, p.Status, r.status)
		}
	}
	if !consoleAdmits(t, pair.admin, ls.url) || !consoleAdmits(t, pair.viewer, ls.url) {
		t.Fatal("a refused end ended a session")
	}

	confirm := pair.admin.Get(ls.url + "/console/sessions/" + vicConsole + "/end")
	if confirm.Status != http.StatusOK || !strings.Contains(confirm.Body, "End this session?") {
		t.Fatalf("confirmation: %d %s", confirm.Status, confirm.Body)
	}
	p := pair.admin.Post(ls.url+"/console/sessions/"+vicConsole+"/end", confirm.HiddenFields(t))
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=session_ended") {
		t.Fatalf("ending vic's session: %d %s", p.Status, p.Location)
	}
	if consoleAdmits(t, pair.viewer, ls.url) {
		t.Fatal("vic's browser is still signed in to the console")
	}
	if providerSignsIn(t, pair.viewer, ls.url) {
		t.Fatal("vic's browser is still signed in at the provider")
	}
	if !consoleAdmits(t, pair.admin, ls.url) {
		t.Fatal("the admin's own session ended")
	}
	entries, _, err := ls.ident.AuditLog(ctx, pair.org.ID, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ended []string
	for _, e := range entries {
		if e.Action == identity.AuditSessionEnd && e.Actor == "staff:ada" && e.Target == "vic" &&
			strings.HasSuffix(e.Detail, staff.EndedByAdmin) {
			ended = append(ended, e.Detail)
		}
	}
	if len(ended) != 2 || !strings.Contains(strings.Join(ended, "|"), vicConsole) {
		t.Fatalf("audit entries of the end: %v (all: %+v)", ended, entries)
	}
}

// TestPersonEndsTheirOtherSessions: signed in twice, a person ends every
// other session from one browser; the other browser is signed out at the
// console and at the provider, this one stays signed in, and the audit log
// has the end.
func TestPersonEndsTheirOtherSessions(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-self", "ada", staff.RoleViewer)
	here, there := formbrowser.New(t), formbrowser.New(t)
	signInStaff(t, here, ls.url, "ada", testPassword)
	signInStaff(t, there, ls.url, "ada", testPassword)

	page := here.Get(ls.url + "/console/sessions")
	if ids := sessionIDs(page.Body); len(ids) != 4 || strings.Count(page.Body, "this browser") != 2 {
		t.Fatalf("sessions listed %v, %d marked this browser: %s", ids, strings.Count(page.Body, "this browser"), page.Body)
	}
	confirm := here.Get(ls.url + "/console/sessions/others/end")
	p := here.Post(ls.url+"/console/sessions/others/end", confirm.HiddenFields(t))
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=others_ended") {
		t.Fatalf("sign out everywhere else: %d %s", p.Status, p.Location)
	}
	if consoleAdmits(t, there, ls.url) || providerSignsIn(t, there, ls.url) {
		t.Fatal("the other browser is still signed in")
	}
	if !consoleAdmits(t, here, ls.url) {
		t.Fatal("this browser was signed out too")
	}
	if ids := sessionIDs(here.Get(ls.url + "/console/sessions").Body); len(ids) != 2 {
		t.Fatalf("after ending the others, sessions listed: %v", ids)
	}
	entries, _, err := ls.ident.AuditLog(context.Background(), "org-self", 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Action == identity.AuditSessionEnd && e.Actor == "staff:ada" && strings.HasSuffix(e.Detail, staff.EndedBySelf) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d audit entries of the ended sessions, want 2: %+v", n, entries)
	}
}

// TestExternalIssuersStaffSessionsAreListedAndEnded: staff who sign in at
// an external issuer have console sessions too; the sessions page names
// the issuer, and ending one signs that browser out of the console.
func TestExternalIssuersStaffSessionsAreListedAndEnded(t *testing.T) {
	t.Parallel()
	rpListener := newListener()
	issuer := setupLogin(t, loginOptions{extraClients: func(string) []login.Client {
		return []login.Client{{ID: "external-console", Name: "an external console", Secret: "external secret",
			Method: login.MethodStaff, RedirectURIs: []string{baseOf(rpListener) + "/console/auth/callback"},
			PostLogoutRedirectURIs: []string{baseOf(rpListener) + "/console/signed-out"}}}
	}})
	issuer.createStaff(t, "tenant-7", "eve@tenant.example", staff.RoleAdmin)
	ls := setupLogin(t, loginOptions{preset: rpListener, env: map[string]string{
		"FLOWD_CONSOLE_OIDC_ISSUER": issuer.url, "FLOWD_CONSOLE_OIDC_CLIENT_ID": "external-console",
		"FLOWD_CONSOLE_OIDC_CLIENT_SECRET": "external secret",
	}})
	signIn := func() *formbrowser.Browser {
		b := formbrowser.New(t)
		form := b.Follow(http.MethodGet, ls.url+"/console", nil)
		v := form.HiddenFields(t)
		v.Set("username", "eve@tenant.example")
		v.Set("password", testPassword)
		if p := b.Follow(http.MethodPost, issuer.url+"/idp/login", v); p.Status != http.StatusOK || !strings.HasPrefix(p.URL, ls.url+"/console") {
			t.Fatalf("sign-in at the external issuer: %d %s", p.Status, p.URL)
		}
		return b
	}
	here, there := signIn(), signIn()

	page := here.Get(ls.url + "/console/sessions")
	ids := sessionIDs(page.Body)
	if len(ids) != 4 || !strings.Contains(page.Body, `<span class="badge">`+issuer.url+`</span>`) {
		t.Fatalf("eve's two console sessions, in her list and everyone's, naming the issuer: %v %s", ids, page.Body)
	}
	all, err := ls.sessions.ListSessions(context.Background(), "tenant-7", nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("sessions of tenant-7: %+v (%v)", all, err)
	}
	for _, s := range all {
		if s.Kind != staff.SessionConsole || s.Issuer != issuer.url || s.StaffID != "" || s.ProviderSessionID != "" {
			t.Fatalf("an external issuer's staff session: %+v", s)
		}
	}
	confirm := here.Get(ls.url + "/console/sessions/" + ids[0] + "/end")
	if p := here.Post(ls.url+"/console/sessions/"+ids[0]+"/end", confirm.HiddenFields(t)); p.Status != http.StatusSeeOther {
		t.Fatalf("ending eve's newest session: %d %s", p.Status, p.Body)
	}
	if consoleAdmits(t, there, ls.url) {
		t.Fatal("the ended browser is still signed in to the console")
	}
	if !consoleAdmits(t, here, ls.url) {
		t.Fatal("this browser was signed out too")
	}
}

// TestConsentSignOutEndsTheSessionOnTheServer: a copy of the consent pages'
// cookie proves no one once its person signed out, and the session's record
// names no one.
func TestConsentSignOutEndsTheSessionOnTheServer(t *testing.T) {
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
		return c.String(http.StatusOK, id.CSRF)
	})
	b := formbrowser.New(t)
	form := b.Follow(http.MethodGet, ls.url+"/consent/auth/login?return=%2Fconsent%2Ftest-whoami", nil)
	v := form.HiddenFields(t)
	v.Set("national_id", "01017012345")
	v.Set("level", "substantial")
	signedIn := b.Follow(http.MethodPost, ls.url+"/idp/login", v)
	if signedIn.Status != http.StatusOK {
		t.Fatalf("consent sign-in: %d %s", signedIn.Status, signedIn.Body)
	}
	cp := copyCookies(t, b, ls.url, "flowd_consent")
	if p := cp.Get(ls.url + "/consent/test-whoami"); p.Status != http.StatusOK {
		t.Fatalf("the copy before the sign-out: %d", p.Status)
	}
	var named int
	if err := ls.pool.QueryRow(context.Background(), `select count(*) from login_sessions
		where kind = 'consent' and (subject <> '' or issuer <> '' or address <> '' or user_agent <> '')`).Scan(&named); err != nil || named != 0 {
		t.Fatalf("%d consent sessions name someone (%v)", named, err)
	}
	if p := b.Post(ls.url+"/consent/auth/logout", url.Values{"csrf": {signedIn.Body}}); p.Status != http.StatusSeeOther {
		t.Fatalf("consent sign-out: %d %s", p.Status, p.Body)
	}
	if p := cp.Get(ls.url + "/consent/test-whoami"); p.Status != http.StatusUnauthorized {
		t.Fatalf("the copy after the sign-out: %d %s", p.Status, p.Body)
	}
}

// TestANewSignInReplacesTheBrowsersSession: signing in again in a browser
// ends its console session, so that a copy of the old cookie is refused,
// while the provider's single sign-on it came through lives on.
func TestANewSignInReplacesTheBrowsersSession(t *testing.T) {
	t.Parallel()
	ls := setupLogin(t, loginOptions{})
	ls.createStaff(t, "org-again", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	signInStaff(t, b, ls.url, "ada", testPassword)
	oldConsole := copyCookies(t, b, ls.url, "flowd_console")
	provider := copyCookies(t, b, ls.url, "flowd_idp")
	if p := b.Follow(http.MethodGet, ls.url+"/console/auth/login", nil); p.Status != http.StatusOK || !strings.Contains(p.Body, "Sign out") {
		t.Fatalf("signing in again through single sign-on: %d %s %s", p.Status, p.URL, p.Body)
	}
	if consoleAdmits(t, oldConsole, ls.url) {
		t.Fatal("the replaced console session still admits a copy of its cookie")
	}
	if !consoleAdmits(t, b, ls.url) || !providerSignsIn(t, provider, ls.url) {
		t.Fatal("the new console session or the single sign-on it came through ended")
	}
	entries, _, err := ls.ident.AuditLog(context.Background(), "org-again", 50, 0)
	if err != nil || len(entries) != 1 || entries[0].Action != identity.AuditSessionEnd ||
		!strings.HasPrefix(entries[0].Detail, "console session") || !strings.HasSuffix(entries[0].Detail, staff.EndedBySignIn) {
		t.Fatalf("audit entries: %+v (%v)", entries, err)
	}
}
