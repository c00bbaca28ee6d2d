package access_test

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

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/webtest"
)

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
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ctx := context.Background()
	ends := []struct {
		name string
		end  func(t *testing.T, b *formbrowser.Browser, username, csrf string)
	}{
		{"sign-out", func(t *testing.T, b *formbrowser.Browser, _, csrf string) {
			if p := b.Follow(http.MethodPost, ls.URL+"/console/auth/logout", url.Values{"csrf": {csrf}}); p.URL != ls.URL+"/console/signed-out" {
				t.Fatalf("sign-out ended at %s", p.URL)
			}
		}},
		{"password reset", func(t *testing.T, _ *formbrowser.Browser, username, _ string) {
			if _, err := ls.Staff.ResetStaffPassword(ctx, username, "another correct horse battery"); err != nil {
				t.Fatal(err)
			}
		}},
		{"role change", func(t *testing.T, _ *formbrowser.Browser, username, _ string) {
			if ch, err := ls.Staff.SetStaffRole(ctx, username, staff.RoleViewer); err != nil || len(ch.Ended) == 0 {
				t.Fatalf("role change: %v, ended %d sessions", err, len(ch.Ended))
			}
		}},
		{"disable", func(t *testing.T, _ *formbrowser.Browser, username, _ string) {
			if _, err := ls.Staff.DisableStaff(ctx, username); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete", func(t *testing.T, _ *formbrowser.Browser, username, _ string) {
			if _, err := ls.Staff.DeleteStaff(ctx, username); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for i, tt := range ends {
		t.Run(tt.name, func(t *testing.T) {
			username := "ada" + string(rune('a'+i))
			ls.CreateStaff(t, "org-a", username, staff.RoleAdmin)
			b := formbrowser.New(t)
			csrf := webtest.SignInStaff(t, b, ls.URL, username, webtest.TestPassword).HiddenFields(t).Get("csrf")
			consoleCopy := webtest.CopyCookies(t, b, ls.URL, "flowd_console")
			providerCopy := webtest.CopyCookies(t, b, ls.URL, "flowd_idp")
			if !consoleAdmits(t, consoleCopy, ls.URL) || !providerSignsIn(t, providerCopy, ls.URL) {
				t.Fatal("the copies did not work while the session lived")
			}

			tt.end(t, b, username, csrf)

			if consoleAdmits(t, consoleCopy, ls.URL) {
				t.Fatal("the copied console cookie still opens the console")
			}
			p := consoleCopy.Post(ls.URL+"/console/settings", url.Values{"csrf": {csrf}, "reference_prefix": {"PWNED"}})
			if p.Status != http.StatusUnauthorized {
				t.Fatalf("a POST with the copied console cookie: %d %s", p.Status, p.Location)
			}
			if providerSignsIn(t, providerCopy, ls.URL) {
				t.Fatal("the copied provider cookie still signs in without the password")
			}
			if consoleAdmits(t, b, ls.URL) {
				t.Fatal("the browser itself is still signed in")
			}
		})
	}
}

// TestSignOutIsAudited: a sign-out is in the organization's audit log, once
// for the console session and once for the provider session it ended.
func TestSignOutIsAudited(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-audit", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	csrf := webtest.SignInStaff(t, b, ls.URL, "ada", webtest.TestPassword).HiddenFields(t).Get("csrf")
	b.Follow(http.MethodPost, ls.URL+"/console/auth/logout", url.Values{"csrf": {csrf}})
	entries, _, err := ls.Ident.AuditLog(context.Background(), "org-audit", 50, 0)
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
	ls := webtest.SetupLogin(t, webtest.LoginOptions{Now: clk.Now, Env: map[string]string{
		"FLOWD_CONSOLE_SESSION_IDLE": "30m", "FLOWD_CONSOLE_SESSION_MAX": "1h"}})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)

	t.Run("absolute", func(t *testing.T) {
		b := formbrowser.New(t)
		webtest.SignInStaff(t, b, ls.URL, "ada", webtest.TestPassword)
		consoleCopy := webtest.CopyCookies(t, b, ls.URL, "flowd_console", "flowd_idp")
		for range 3 { // in use all along: 19, 38, 57 minutes
			clk.advance(19 * time.Minute)
			if !consoleAdmits(t, b, ls.URL) {
				t.Fatalf("the session ended while in use, before its maximum")
			}
		}
		clk.advance(4 * time.Minute)
		if consoleAdmits(t, consoleCopy, ls.URL) || consoleAdmits(t, b, ls.URL) {
			t.Fatal("the console session outlived FLOWD_CONSOLE_SESSION_MAX")
		}
		if providerSignsIn(t, b, ls.URL) {
			t.Fatal("the provider signed the browser in again past FLOWD_CONSOLE_SESSION_MAX")
		}
	})
	t.Run("idle", func(t *testing.T) {
		b := formbrowser.New(t)
		webtest.SignInStaff(t, b, ls.URL, "ada", webtest.TestPassword)
		clk.advance(31 * time.Minute)
		if consoleAdmits(t, b, ls.URL) {
			t.Fatal("the console session outlived FLOWD_CONSOLE_SESSION_IDLE")
		}
		if providerSignsIn(t, b, ls.URL) {
			t.Fatal("the provider signed the browser in again after FLOWD_CONSOLE_SESSION_IDLE unused")
		}
	})
	t.Run("swept", func(t *testing.T) {
		b := formbrowser.New(t)
		webtest.SignInStaff(t, b, ls.URL, "ada", webtest.TestPassword)
		if _, err := ls.Sessions.SweepExpired(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !consoleAdmits(t, b, ls.URL) {
			t.Fatal("the sweep ended a live session")
		}
		clk.advance(2 * time.Hour)
		n, err := ls.Sessions.SweepExpired(context.Background())
		if err != nil || n < 2 {
			t.Fatalf("the sweep deleted %d timed-out sessions (%v), want at least this browser's two", n, err)
		}
		var left int
		if err := ls.Pool.QueryRow(context.Background(), `select count(*) from login_sessions`).Scan(&left); err != nil || left != 0 {
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
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	pair := ls.SignInStaffPair(t, "Test Bank", "TB")
	ls.CreateStaff(t, pair.Other.ID, "oscar", staff.RoleAdmin)
	oscar := formbrowser.New(t)
	oscarCSRF := webtest.SignInStaff(t, oscar, ls.URL, "oscar", webtest.TestPassword).HiddenFields(t).Get("csrf")

	page := pair.Admin.Get(ls.URL + "/console/sessions")
	if page.Status != http.StatusOK || !strings.Contains(page.Body, "Everyone's sessions") || !strings.Contains(page.Body, "vic") {
		t.Fatalf("the admin's sessions page: %d %s", page.Status, page.Body)
	}
	ctx := context.Background()
	vicSessions, err := ls.Sessions.ListSessions(ctx, pair.Org.ID, nil)
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

	viewerPage := pair.Viewer.Get(ls.URL + "/console/sessions")
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
		{"a viewer ends an admin's session", pair.Viewer, "/console/sessions/" + adaConsole + "/end", pair.ViewerCSRF, http.StatusNotFound},
		{"a viewer ends all of an admin's", pair.Viewer, "/console/sessions/" + adaConsole + "/end-all", pair.ViewerCSRF, http.StatusForbidden},
		{"another organization's admin", oscar, "/console/sessions/" + vicConsole + "/end", oscarCSRF, http.StatusNotFound},
		{"a malformed id", pair.Admin, "/console/sessions/not-a-session/end", pair.AdminCSRF, http.StatusNotFound},
	}
	for _, r := range refusals {
		if p := r.b.Post(ls.URL+r.path, url.Values{"csrf": {r.csrf}}); p.Status != r.status {
			t.Fatalf("%s: %d, want %d", r.name, p.Status, r.status)
		}
	}
	if !consoleAdmits(t, pair.Admin, ls.URL) || !consoleAdmits(t, pair.Viewer, ls.URL) {
		t.Fatal("a refused end ended a session")
	}

	confirm := pair.Admin.Get(ls.URL + "/console/sessions/" + vicConsole + "/end")
	if confirm.Status != http.StatusOK || !strings.Contains(confirm.Body, "End this session?") {
		t.Fatalf("confirmation: %d %s", confirm.Status, confirm.Body)
	}
	p := pair.Admin.Post(ls.URL+"/console/sessions/"+vicConsole+"/end", confirm.HiddenFields(t))
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=session_ended") {
		t.Fatalf("ending vic's session: %d %s", p.Status, p.Location)
	}
	if consoleAdmits(t, pair.Viewer, ls.URL) {
		t.Fatal("vic's browser is still signed in to the console")
	}
	if providerSignsIn(t, pair.Viewer, ls.URL) {
		t.Fatal("vic's browser is still signed in at the provider")
	}
	if !consoleAdmits(t, pair.Admin, ls.URL) {
		t.Fatal("the admin's own session ended")
	}
	entries, _, err := ls.Ident.AuditLog(ctx, pair.Org.ID, 50, 0)
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
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-self", "ada", staff.RoleViewer)
	here, there := formbrowser.New(t), formbrowser.New(t)
	webtest.SignInStaff(t, here, ls.URL, "ada", webtest.TestPassword)
	webtest.SignInStaff(t, there, ls.URL, "ada", webtest.TestPassword)

	page := here.Get(ls.URL + "/console/sessions")
	if ids := sessionIDs(page.Body); len(ids) != 4 || strings.Count(page.Body, "this browser") != 2 {
		t.Fatalf("sessions listed %v, %d marked this browser: %s", ids, strings.Count(page.Body, "this browser"), page.Body)
	}
	confirm := here.Get(ls.URL + "/console/sessions/others/end")
	p := here.Post(ls.URL+"/console/sessions/others/end", confirm.HiddenFields(t))
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=others_ended") {
		t.Fatalf("sign out everywhere else: %d %s", p.Status, p.Location)
	}
	if consoleAdmits(t, there, ls.URL) || providerSignsIn(t, there, ls.URL) {
		t.Fatal("the other browser is still signed in")
	}
	if !consoleAdmits(t, here, ls.URL) {
		t.Fatal("this browser was signed out too")
	}
	if ids := sessionIDs(here.Get(ls.URL + "/console/sessions").Body); len(ids) != 2 {
		t.Fatalf("after ending the others, sessions listed: %v", ids)
	}
	entries, _, err := ls.Ident.AuditLog(context.Background(), "org-self", 50, 0)
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
	rpListener := webtest.NewListener()
	issuer := webtest.SetupLogin(t, webtest.LoginOptions{ExtraClients: func(string) []login.Client {
		return []login.Client{{ID: "external-console", Name: "an external console", Secret: "external secret",
			Method: login.MethodStaff, RedirectURIs: []string{webtest.BaseOf(rpListener) + "/console/auth/callback"},
			PostLogoutRedirectURIs: []string{webtest.BaseOf(rpListener) + "/console/signed-out"}}}
	}})
	issuer.CreateStaff(t, "tenant-7", "eve@tenant.example", staff.RoleAdmin)
	ls := webtest.SetupLogin(t, webtest.LoginOptions{Preset: rpListener, Env: map[string]string{
		"FLOWD_CONSOLE_OIDC_ISSUER": issuer.URL, "FLOWD_CONSOLE_OIDC_CLIENT_ID": "external-console",
		"FLOWD_CONSOLE_OIDC_CLIENT_SECRET": "external secret",
	}})
	signIn := func() *formbrowser.Browser {
		b := formbrowser.New(t)
		form := b.Follow(http.MethodGet, ls.URL+"/console", nil)
		v := form.HiddenFields(t)
		v.Set("username", "eve@tenant.example")
		v.Set("password", webtest.TestPassword)
		if p := b.Follow(http.MethodPost, issuer.URL+"/idp/login", v); p.Status != http.StatusOK || !strings.HasPrefix(p.URL, ls.URL+"/console") {
			t.Fatalf("sign-in at the external issuer: %d %s", p.Status, p.URL)
		}
		return b
	}
	here, there := signIn(), signIn()

	page := here.Get(ls.URL + "/console/sessions")
	ids := sessionIDs(page.Body)
	if len(ids) != 4 || !strings.Contains(page.Body, `<span class="badge">`+issuer.URL+`</span>`) {
		t.Fatalf("eve's two console sessions, in her list and everyone's, naming the issuer: %v %s", ids, page.Body)
	}
	all, err := ls.Sessions.ListSessions(context.Background(), "tenant-7", nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("sessions of tenant-7: %+v (%v)", all, err)
	}
	for _, s := range all {
		if s.Kind != staff.SessionConsole || s.Issuer != issuer.URL || s.StaffID != "" || s.ProviderSessionID != "" {
			t.Fatalf("an external issuer's staff session: %+v", s)
		}
	}
	confirm := here.Get(ls.URL + "/console/sessions/" + ids[0] + "/end")
	if p := here.Post(ls.URL+"/console/sessions/"+ids[0]+"/end", confirm.HiddenFields(t)); p.Status != http.StatusSeeOther {
		t.Fatalf("ending eve's newest session: %d %s", p.Status, p.Body)
	}
	if consoleAdmits(t, there, ls.URL) {
		t.Fatal("the ended browser is still signed in to the console")
	}
	if !consoleAdmits(t, here, ls.URL) {
		t.Fatal("this browser was signed out too")
	}
}

// TestANewSignInReplacesTheBrowsersSession: signing in again in a browser
// ends its console session, so that a copy of the old cookie is refused,
// while the provider's single sign-on it came through lives on.
func TestANewSignInReplacesTheBrowsersSession(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-again", "ada", staff.RoleAdmin)
	b := formbrowser.New(t)
	webtest.SignInStaff(t, b, ls.URL, "ada", webtest.TestPassword)
	oldConsole := webtest.CopyCookies(t, b, ls.URL, "flowd_console")
	provider := webtest.CopyCookies(t, b, ls.URL, "flowd_idp")
	if p := b.Follow(http.MethodGet, ls.URL+"/console/auth/login", nil); p.Status != http.StatusOK || !strings.Contains(p.Body, "Sign out") {
		t.Fatalf("signing in again through single sign-on: %d %s %s", p.Status, p.URL, p.Body)
	}
	if consoleAdmits(t, oldConsole, ls.URL) {
		t.Fatal("the replaced console session still admits a copy of its cookie")
	}
	if !consoleAdmits(t, b, ls.URL) || !providerSignsIn(t, provider, ls.URL) {
		t.Fatal("the new console session or the single sign-on it came through ended")
	}
	entries, _, err := ls.Ident.AuditLog(context.Background(), "org-again", 50, 0)
	if err != nil || len(entries) != 1 || entries[0].Action != identity.AuditSessionEnd ||
		!strings.HasPrefix(entries[0].Detail, "console session") || !strings.HasSuffix(entries[0].Detail, staff.EndedBySignIn) {
		t.Fatalf("audit entries: %+v (%v)", entries, err)
	}
}
