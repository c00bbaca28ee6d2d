package access_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestConsoleClientRateLimit: an admin gives a client its own rate limit
// on the client's page in the credentials area, and the client's next API
// request is held to it; no limit and the default come back the same way.
// Each change is audited in its transaction (a broken audit log leaves the
// limit as it was); saving the same limit records nothing; a bad number
// re-renders the form; viewers and other organizations' clients are refused.
func TestConsoleClientRateLimit(t *testing.T) {
	t.Parallel()
	// The rate limit's one-minute window must not end while the test
	// counts the client's requests in it: the identity parts' clock stands still.
	stopped := time.Now()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{IdentityNow: func() time.Time { return stopped }})
	ctx := context.Background()
	org, err := ls.Ident.CreateOrganization(ctx, orgs.NewOrganization{Name: "Limit Bank", ReferencePrefix: "LIM"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := ls.Ident.CreateOrganization(ctx, orgs.NewOrganization{Name: "Other Bank", ReferencePrefix: "OTB"})
	if err != nil {
		t.Fatal(err)
	}
	ls.CreateStaff(t, org.ID, "ada", staff.RoleAdmin)
	ls.CreateStaff(t, org.ID, "vic", staff.RoleViewer)
	client, err := ls.Ident.CreateClient(ctx, orgs.NewClient{OrganizationID: org.ID, Name: "Backend"})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := ls.Ident.CreateClient(ctx, orgs.NewClient{OrganizationID: other.ID, Name: "Foreign"})
	if err != nil {
		t.Fatal(err)
	}
	resp, tok := webtest.PostToken(t, ls.URL+"/oauth/token", webtest.FormType, url.Values{"grant_type": {"client_credentials"},
		"client_id": {client.ID}, "client_secret": {client.Secret}}.Encode(), "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %d %v", resp.StatusCode, tok)
	}
	api := webtest.LimitedAPI{URL: ls.URL, Srv: ls.Srv, Pool: ls.Pool}
	token := tok["access_token"].(string)
	policy := func() (int, string) {
		resp, _ := api.Call(t, "GET", "/api/flows", token, "")
		return resp.StatusCode, resp.Header.Get("RateLimit-Policy")
	}
	entries := func() []string {
		log, _, err := ls.Ident.AuditLog(ctx, org.ID, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range log {
			if e.Action == identity.AuditClientRateLimit {
				out = append(out, e.Actor+" "+e.Target+": "+e.Detail)
			}
		}
		return out
	}
	if status, p := policy(); status != http.StatusOK || p != `"default";q=600;w=60` {
		t.Fatalf("before any change: %d, RateLimit-Policy %q", status, p)
	}

	admin := formbrowser.New(t)
	csrf := webtest.SignInStaff(t, admin, ls.URL, "ada", webtest.TestPassword).HiddenFields(t).Get("csrf")
	post := func(b *formbrowser.Browser, csrf, path string, form url.Values) formbrowser.Page {
		form.Set("csrf", csrf)
		return b.Post(ls.URL+path, form)
	}
	page := admin.Get(ls.URL + "/console/credentials").Body
	path := "/console/credentials/clients/" + client.ID + "/rate-limit"
	if !strings.Contains(page, "600 per minute (default)") || !strings.Contains(page, `href="`+path+`"`) {
		t.Fatalf("the credentials page shows no rate limit or no link to change it: %s", page)
	}
	if form := admin.Get(ls.URL + path); form.Status != http.StatusOK || !strings.Contains(form.Body, `name="per_minute"`) {
		t.Fatalf("the rate limit form: %d %s", form.Status, form.Body)
	}

	mend := webtest.BreakAuditLog(t, ls.Pool)
	if p := post(admin, csrf, path, url.Values{"limit": {"own"}, "per_minute": {"2"}}); p.Status != http.StatusInternalServerError {
		t.Fatalf("with the audit log broken: %d", p.Status)
	}
	mend()
	if _, p := policy(); p != `"default";q=600;w=60` {
		t.Fatalf("a change whose audit failed took effect: RateLimit-Policy %q", p)
	}

	p := post(admin, csrf, path, url.Values{"limit": {"own"}, "per_minute": {"4"}})
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=rate_limit") {
		t.Fatalf("save: %d %s", p.Status, p.Location)
	}
	// The token stays valid; the client's next requests are held to its new
	// limit, in the window where it has made two requests already.
	for range 2 {
		if status, pol := policy(); status != http.StatusOK || pol != `"default";q=4;w=60` {
			t.Fatalf("after the change: %d, RateLimit-Policy %q", status, pol)
		}
	}
	if status, _ := policy(); status != http.StatusTooManyRequests {
		t.Fatalf("the request past the client's own limit: %d", status)
	}
	if log := entries(); len(log) != 1 || log[0] != "staff:ada "+client.ID+": Backend; API rate limit: 4 requests per minute" {
		t.Fatalf("audit log %q", log)
	}
	if p := post(admin, csrf, path, url.Values{"limit": {"own"}, "per_minute": {"4"}}); p.Status != http.StatusSeeOther || len(entries()) != 1 {
		t.Fatalf("the same limit again: %d, audit %q", p.Status, entries())
	}
	if page := admin.Get(ls.URL + "/console/credentials").Body; !strings.Contains(page, "4 per minute") {
		t.Fatalf("the credentials page does not show the client's own limit: %s", page)
	}

	for _, bad := range []url.Values{
		{"limit": {"own"}, "per_minute": {"0"}},
		{"limit": {"own"}, "per_minute": {"lots"}},
		{"limit": {"own"}, "per_minute": {"1000000001"}},
		{"limit": {"some"}},
	} {
		if p := post(admin, csrf, path, bad); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, `class="field-error"`) {
			t.Fatalf("%v: %d %s", bad, p.Status, p.Body)
		}
	}
	if p := post(admin, csrf, "/console/credentials/clients/"+foreign.ID+"/rate-limit", url.Values{"limit": {"none"}}); p.Status != http.StatusNotFound {
		t.Fatalf("another organization's client: %d", p.Status)
	}
	if c, err := ls.Ident.Client(ctx, foreign.ID); err != nil || c.RateLimit.Own {
		t.Fatalf("another organization's client was changed: %+v %v", c.RateLimit, err)
	}
	viewer := formbrowser.New(t)
	viewerCSRF := webtest.SignInStaff(t, viewer, ls.URL, "vic", webtest.TestPassword).HiddenFields(t).Get("csrf")
	if p := post(viewer, viewerCSRF, path, url.Values{"limit": {"none"}}); p.Status != http.StatusForbidden {
		t.Fatalf("a viewer: %d", p.Status)
	}

	if p := post(admin, csrf, path, url.Values{"limit": {"none"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("no limit: %d", p.Status)
	}
	if status, pol := policy(); status != http.StatusOK || pol != "" {
		t.Fatalf("without a limit: %d, RateLimit-Policy %q", status, pol)
	}
	if p := post(admin, csrf, path, url.Values{"limit": {"default"}, "per_minute": {""}}); p.Status != http.StatusSeeOther {
		t.Fatalf("the default: %d", p.Status)
	}
	if _, pol := policy(); pol != `"default";q=600;w=60` {
		t.Fatalf("back to the default: RateLimit-Policy %q", pol)
	}
	if log := entries(); len(log) != 3 || !strings.HasSuffix(log[0], "API rate limit: the default") || !strings.HasSuffix(log[1], "API rate limit: none") {
		t.Fatalf("audit log %q", log)
	}
}
