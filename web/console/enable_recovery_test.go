package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/webtest"
)

// seedEvents stores n flow.created events of org, now, with no delivery:
// what flowd stores while every endpoint is disabled.
func seedEvents(t testing.TB, pool *pgxpool.Pool, org string, n int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `insert into events (organization_id, id, flow_id, sequence, type, body)
		select $1, gen_random_uuid(), gen_random_uuid()::text, 1, 'flow.created',
			'{"type":"flow.created","timestamp":"2026-01-02T03:04:05.000Z","data":{"sequence":1}}'
		from generate_series(1, $2)`, org, n); err != nil {
		t.Fatal(err)
	}
}

// consoleRecovery waits until the page at path shows a recovery done, and
// returns the page.
func consoleRecovery(t *testing.T, b *formbrowser.Browser, path string) formbrowser.Page {
	t.Helper()
	deadline := testwait.Deadline(t)
	p := b.Get(path)
	for ; !strings.Contains(p.Body, ">done</span>"); p = b.Get(path) {
		if time.Now().After(deadline) {
			t.Fatalf("the recovery did not reach done: %s", p.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

// TestConsoleEnableWithRecovery: the Webhooks page's Enable leads to a
// confirmation that offers, ticked, to recover what the endpoint missed,
// from when it was disabled (or, for an endpoint that was failing, a retry
// schedule before it began to); enabling with it ticked enables the
// endpoint and starts the recovery, whose progress its page shows, both in
// the audit log. An unreadable time enables nothing; unticked, enabling
// only enables. Viewers are refused.
func TestConsoleEnableWithRecovery(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	webtest.CreateTestEvents(t, ls.Pool)
	ctx := context.Background()
	s := ls.SignInStaffPair(t, "Pause Bank", "PAU")
	org, admin, viewer, csrf := s.Org, s.Admin, s.Viewer, s.AdminCSRF
	disabled := false
	ep, err := ls.Srv.Deps.Endpoints.Create(ctx, org.ID, webhooks.NewEndpoint{URL: "https://hooks.pause.example/flowd", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	off, err := ls.Srv.Deps.Endpoints.Update(ctx, org.ID, ep.ID, webhooks.EndpointUpdate{Enabled: &disabled}, etag.Any)
	if err != nil || off.DisabledAt == nil {
		t.Fatalf("disable: %+v %v", off, err)
	}
	const n = 9
	seedEvents(t, ls.Pool, org.ID, n)
	confirm := "/console/webhooks/" + ep.ID + "/enable"

	if p := admin.Get(ls.URL + "/console/webhooks"); !strings.Contains(p.Body, `<form method="get" action="`+confirm+`"`) {
		t.Fatalf("the list does not lead to the confirmation: %s", p.Body)
	}
	if p := admin.Get(ls.URL + "/console/webhooks/" + ep.ID); !strings.Contains(p.Body, `href="`+confirm+`"`) {
		t.Fatalf("the disabled endpoint's page does not lead to the confirmation: %s", p.Body)
	}
	since := off.DisabledAt.UTC().Format("2006-01-02T15:04:05")
	p := admin.Get(ls.URL + confirm)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `name="recover" value="true" checked`) ||
		!strings.Contains(p.Body, `value="`+since+`"`) || !strings.Contains(p.Body, "When it was disabled.") ||
		!strings.Contains(p.Body, "hooks.pause.example") {
		t.Fatalf("the confirmation: %d %s", p.Status, p.Body)
	}
	if p := viewer.Get(ls.URL + confirm); p.Status != http.StatusForbidden {
		t.Errorf("a viewer's confirmation: %d", p.Status)
	}
	if p := viewer.Post(ls.URL+confirm, url.Values{"csrf": {s.ViewerCSRF}, "recover": {"true"}, "since": {since}}); p.Status != http.StatusForbidden {
		t.Errorf("a viewer enables: %d", p.Status)
	}

	// An unreadable time is refused beside the field, and enables nothing.
	p = admin.Post(ls.URL+confirm, url.Values{"csrf": {csrf}, "recover": {"true"}, "since": {"when it broke"}})
	if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, `id="since-error"`) || !strings.Contains(p.Body, `value="when it broke"`) {
		t.Fatalf("an unreadable time: %d %s", p.Status, p.Body)
	}
	if e, err := ls.Srv.Deps.Endpoints.Get(ctx, org.ID, ep.ID); err != nil || e.Enabled {
		t.Fatalf("after the refusal: %+v %v, want still disabled", e, err)
	}

	p = admin.Post(ls.URL+confirm, url.Values{"csrf": {csrf}, "recover": {"true"}, "since": {since}})
	page := "/console/webhooks/" + ep.ID
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.URL+page+"?notice=endpoint_enabled_recovering") {
		t.Fatalf("enable with recovery: %d %s %s", p.Status, p.Location, p.Body)
	}
	if e, err := ls.Srv.Deps.Endpoints.Get(ctx, org.ID, ep.ID); err != nil || !e.Enabled || e.DisabledAt != nil {
		t.Fatalf("after enabling: %+v %v", e, err)
	}
	p = admin.Get(p.Location)
	if !strings.Contains(p.Body, "was enabled; the events it missed are being sent") || !strings.Contains(p.Body, ">queued</span>") ||
		!strings.Contains(p.Body, fmt.Sprintf("0 of %d", n)) || !strings.Contains(p.Body, `http-equiv="refresh"`) {
		t.Fatalf("the endpoint's page after enabling: %s", p.Body)
	}
	startWebhooks(t, ls.Srv)
	if p := consoleRecovery(t, admin, ls.URL+page); !strings.Contains(p.Body, fmt.Sprintf("%d of %d", n, n)) {
		t.Fatalf("the recovery once done: %s", p.Body)
	}
	entries, _, err := ls.Ident.AuditLog(ctx, org.ID, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, e := range entries {
		found[e.Action] = e.Actor + " " + e.Target + " " + e.Detail
	}
	if got := found["webhook_endpoint.update"]; !strings.HasPrefix(got, "staff:ada "+ep.ID+" enabled") {
		t.Errorf("the enabling's entry: %q", got)
	}
	if got := found["webhook_endpoint.recover"]; !strings.HasPrefix(got, "staff:ada "+ep.ID+" recovery ") ||
		!strings.Contains(got, fmt.Sprintf(" of %d ", n)) {
		t.Errorf("the recovery's entry: %q", got)
	}
	// Enabled, it has nothing to confirm.
	if p := admin.Get(ls.URL + confirm); p.Status != http.StatusSeeOther || p.Location != ls.URL+"/console/webhooks" {
		t.Errorf("the confirmation of an enabled endpoint: %d %s", p.Status, p.Location)
	}

	// An endpoint that was failing is offered the retry schedule before it
	// began to fail; unticked, enabling starts no recovery.
	failing, err := ls.Srv.Deps.Endpoints.Create(ctx, org.ID, webhooks.NewEndpoint{URL: "https://down.pause.example/", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Pool.Exec(ctx, `update webhook_endpoints set failing_since = now() - interval '1 hour' where id = $1`, failing.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Srv.Deps.Endpoints.Update(ctx, org.ID, failing.ID, webhooks.EndpointUpdate{Enabled: &disabled}, etag.Any); err != nil {
		t.Fatal(err)
	}
	got, err := ls.Srv.Deps.Endpoints.Get(ctx, org.ID, failing.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := got.FailingSince.Add(-webhooksSchedule()).UTC().Format("2006-01-02T15:04:05")
	confirm = "/console/webhooks/" + failing.ID + "/enable"
	if p := admin.Get(ls.URL + confirm); !strings.Contains(p.Body, `value="`+want+`"`) || !strings.Contains(p.Body, "before its deliveries began to fail") {
		t.Fatalf("the confirmation for a failing endpoint, want %s: %s", want, p.Body)
	}
	p = admin.Post(ls.URL+confirm, url.Values{"csrf": {csrf}, "since": {want}})
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=endpoint_enabled&") {
		t.Fatalf("enable without recovery: %d %s", p.Status, p.Location)
	}
	if got := countRows(t, ls.Pool, `select count(*) from webhook_recoveries where endpoint_id = '`+failing.ID+`'`); got != 0 {
		t.Errorf("%d recoveries after enabling without one", got)
	}
}

// webhooksSchedule is how long the default retry schedule lasts.
func webhooksSchedule() time.Duration {
	var d time.Duration
	for _, w := range webhooks.DefaultSchedule {
		d += w
	}
	return d
}

// TestConsoleFlowURLRecovery: on the Webhooks page an admin recovers the
// failed deliveries to the flows' own webhook URLs of one host and follows
// the recovery to done; bad values, a second request while one runs,
// viewers and a missing CSRF token are refused.
func TestConsoleFlowURLRecovery(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	webtest.CreateTestEvents(t, ls.Pool)
	ctx := context.Background()
	s := ls.SignInStaffPair(t, "Flow Bank", "FLW")
	org, admin, viewer, csrf := s.Org, s.Admin, s.Viewer, s.AdminCSRF
	const n = 4
	for i := range n {
		seedFlowEvent(t, ls.Pool, org.ID, fmt.Sprintf("019ab3c6-%04d-7f80-9a1b-2c3d4e5f6a7d", i), 1, "failed")
	}
	seedFlowEvent(t, ls.Pool, org.ID, "019ab3c6-9999-7f80-9a1b-2c3d4e5f6a7d", 1, "delivered")
	list := ls.URL + "/console/webhooks"
	since := time.Now().UTC().Add(-2 * time.Hour).Format("2006-01-02T15:04")

	if p := admin.Get(list); !strings.Contains(p.Body, `action="/console/webhooks/recover"`) || strings.Contains(p.Body, `id="flow-url-recoveries"`) {
		t.Fatalf("the Webhooks page: %s", p.Body)
	}
	if p := viewer.Get(list); strings.Contains(p.Body, `action="/console/webhooks/recover"`) {
		t.Fatalf("a viewer is offered the recovery: %s", p.Body)
	}
	for _, c := range []struct {
		name    string
		b       *formbrowser.Browser
		form    url.Values
		status  int
		showing string
	}{
		{"not a time", admin, url.Values{"csrf": {csrf}, "since": {"last week"}}, http.StatusBadRequest, `id="since-error"`},
		{"no time", admin, url.Values{"csrf": {csrf}, "since": {""}}, http.StatusBadRequest, `id="since-error"`},
		{"not a host", admin, url.Values{"csrf": {csrf}, "since": {since}, "host": {"https://127.0.0.1:9/hooks"}}, http.StatusBadRequest, `id="host-error"`},
		{"a viewer", viewer, url.Values{"csrf": {s.ViewerCSRF}, "since": {since}}, http.StatusForbidden, ""},
		{"no CSRF token", admin, url.Values{"since": {since}}, http.StatusForbidden, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.b.Post(list+"/recover", c.form)
			if p.Status != c.status || !strings.Contains(p.Body, c.showing) {
				t.Errorf("%d, want %d showing %q: %s", p.Status, c.status, c.showing, p.Body)
			}
		})
	}
	if got := countRows(t, ls.Pool, `select count(*) from webhook_recoveries`); got != 0 {
		t.Fatalf("%d recoveries after the refusals", got)
	}

	p := admin.Post(list+"/recover", url.Values{"csrf": {csrf}, "since": {since}, "host": {"127.0.0.1:9"}})
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, list+"?notice=flow_urls_recovering") || !strings.HasSuffix(p.Location, "#flow-urls") {
		t.Fatalf("recover: %d %s %s", p.Status, p.Location, p.Body)
	}
	p = admin.Get(p.Location)
	if !strings.Contains(p.Body, "The failed deliveries to the flows&#39; webhook URLs (127.0.0.1:9) are being sent again") ||
		!strings.Contains(p.Body, `id="flow-url-recoveries"`) || !strings.Contains(p.Body, ">queued</span>") ||
		!strings.Contains(p.Body, fmt.Sprintf("0 of %d", n)) || !strings.Contains(p.Body, `http-equiv="refresh"`) {
		t.Fatalf("the page after the request: %s", p.Body)
	}
	if p := admin.Post(list+"/recover", url.Values{"csrf": {csrf}, "since": {since}}); p.Status != http.StatusConflict ||
		!strings.Contains(p.Body, "A recovery of the flows&#39; webhook URLs is already queued") {
		t.Fatalf("a second request: %d %s", p.Status, p.Body)
	}
	if p := viewer.Get(list); !strings.Contains(p.Body, `id="flow-url-recoveries"`) {
		t.Errorf("a viewer does not see the recoveries: %s", p.Body)
	}
	startWebhooks(t, ls.Srv)
	if p := consoleRecovery(t, admin, list); !strings.Contains(p.Body, fmt.Sprintf("%d of %d", n, n)) || strings.Contains(p.Body, `http-equiv="refresh"`) {
		t.Fatalf("the page once done: %s", p.Body)
	}
	entries, _, err := ls.Ident.AuditLog(ctx, org.ID, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for _, e := range entries {
		if e.Action == "webhook.recover" {
			recorded = append(recorded, e.Actor+" "+e.Detail)
		}
	}
	if len(recorded) != 1 || !strings.HasPrefix(recorded[0], "staff:ada recovery ") ||
		!strings.Contains(recorded[0], fmt.Sprintf(" of %d failed deliveries to the flows' webhook URLs on 127.0.0.1:9 since ", n)) {
		t.Errorf("the audit log: %q", recorded)
	}
}
