package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestConsoleBannerNamesEndpointsFlowdDisabled: while flowd has disabled an
// endpoint of the organization, every console page, for every role, warns
// of it by name and links to the Webhooks page, in English or Norwegian;
// an endpoint a person disabled gives no banner, nor does another
// organization's. The Webhooks page shows the reason, and enabling the
// endpoint there ends the banner.
func TestConsoleBannerNamesEndpointsFlowdDisabled(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ctx := context.Background()
	s := ls.SignInStaffPair(t, "Hook Bank", "HOOK")
	org, other, admin, viewer, csrf := s.Org, s.Other, s.Admin, s.Viewer, s.AdminCSRF
	ls.CreateStaff(t, other.ID, "oscar", staff.RoleAdmin)
	outsider := formbrowser.New(t)
	webtest.SignInStaff(t, outsider, ls.URL, "oscar", webtest.TestPassword)
	create := func(orgID, u, description string, enabled bool) webhooks.Endpoint {
		t.Helper()
		e, err := ls.Srv.Deps.Endpoints.Create(ctx, orgID, webhooks.NewEndpoint{URL: u, Description: description, Enabled: enabled})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// disabledByFlowd puts an endpoint in the state the webhooks module
	// leaves a failing one in (its tests show how it gets there).
	disabledByFlowd := func(e webhooks.Endpoint) {
		t.Helper()
		if _, err := ls.Pool.Exec(ctx, `update webhook_endpoints set enabled = false, failing_since = now() - interval '5 days',
			disabled_reason = 'Deliveries failed for 5 days without a success; the last failure: HTTP 503 Service Unavailable.'
			where id = $1`, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	banner := func(p formbrowser.Page) string {
		t.Helper()
		if p.Status != http.StatusOK {
			t.Fatalf("%s: %d", p.URL, p.Status)
		}
		i := strings.Index(p.Body, `id="console-banner"`)
		if i < 0 {
			return ""
		}
		end := strings.Index(p.Body[i:], "</p>")
		return p.Body[i : i+end]
	}
	pages := []string{"/console/flows", "/console/webhooks", "/console/settings", "/console/credentials"}

	loan := create(org.ID, "https://hooks.hook.example/flowd?token=secret", "Loan system", true)
	create(org.ID, "https://paused.hook.example/", "Paused by a person", false)
	create(other.ID, "https://hooks.other.example/", "", true)
	for _, path := range pages {
		if b := banner(admin.Get(ls.URL + path)); b != "" {
			t.Fatalf("%s: a banner with no endpoint disabled by flowd: %s", path, b)
		}
	}

	disabledByFlowd(loan)
	for _, path := range pages {
		for name, b := range map[string]*formbrowser.Browser{"admin": admin, "viewer": viewer} {
			got := banner(b.Get(ls.URL + path))
			if !strings.Contains(got, `lang="en"`) || !strings.Contains(got, "flowd disabled the webhook endpoint “Loan system”") ||
				!strings.Contains(got, `<a href="/console/webhooks">See why on the Webhooks page</a>`) || strings.Contains(got, "secret") {
				t.Errorf("%s, %s: banner %q", name, path, got)
			}
		}
		if b := banner(outsider.Get(ls.URL + path)); b != "" {
			t.Errorf("another organization's staff see %s", b)
		}
	}
	viewer.AcceptLanguage = "nb-NO,nb;q=0.9,en;q=0.5"
	if got := banner(viewer.Get(ls.URL + "/console/flows")); !strings.Contains(got, `lang="nb"`) ||
		!strings.Contains(got, "flowd har slått av webhook-endepunktet «Loan system»") || !strings.Contains(got, "Se hvorfor på Webhooks-siden") {
		t.Errorf("Norwegian banner %q", got)
	}

	// Several are named together, by description or else by host.
	audit := create(org.ID, "https://audit.hook.example/h?k=v", "", true)
	disabledByFlowd(audit)
	if got := banner(admin.Get(ls.URL + "/console/flows")); !strings.Contains(got,
		"flowd disabled these webhook endpoints because their deliveries kept failing: Loan system, audit.hook.example.") {
		t.Errorf("two disabled: %q", got)
	}

	// The Webhooks page gives the reason, and admins an Enable button, which ends the banner.
	p := admin.Get(ls.URL + "/console/webhooks")
	if !strings.Contains(p.Body, "Deliveries failed for 5 days without a success; the last failure: HTTP 503 Service Unavailable.") ||
		!strings.Contains(p.Body, `action="/console/webhooks/`+loan.ID+`/enable"`) {
		t.Fatalf("webhooks page: %s", p.Body)
	}
	if p = viewer.Get(ls.URL + "/console/webhooks"); strings.Contains(p.Body, "/enable") {
		t.Error("a viewer is offered the Enable button")
	}
	for _, e := range []string{loan.ID, audit.ID} {
		if p := admin.Post(ls.URL+"/console/webhooks/"+e+"/enable", url.Values{"csrf": {csrf}}); p.Status != http.StatusSeeOther {
			t.Fatalf("enable: %d %s", p.Status, p.Body)
		}
	}
	got, err := ls.Srv.Deps.Endpoints.Get(ctx, org.ID, loan.ID)
	if err != nil || !got.Enabled || got.DisabledReason != "" || got.FailingSince != nil {
		t.Fatalf("after enabling: %+v, %v", got, err)
	}
	for _, path := range pages {
		if b := banner(admin.Get(ls.URL + path)); b != "" {
			t.Errorf("%s: banner after enabling: %s", path, b)
		}
	}
}
