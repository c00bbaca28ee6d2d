package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/webtest"
)

// seedFlowEvent stores an event of a flow with a delivery to the flow's
// webhook URL in state, and returns the event's id.
func seedFlowEvent(t testing.TB, pool *pgxpool.Pool, org, flowID string, sequence int, state string) string {
	t.Helper()
	var id string
	if err := pool.QueryRow(context.Background(), `
		with ev as (
			insert into events (organization_id, id, flow_id, sequence, type, body)
			values ($1, gen_random_uuid(), $2, $3, 'flow.created', '{"type":"flow.created","timestamp":"2026-01-02T03:04:05.000Z","data":{}}')
			returning id, body)
		insert into webhook_events (id, organization_id, flow_id, type, url, body, state, job_id, event_id, finished_at)
		select id, $1, $2, 'flow.created', 'http://127.0.0.1:9/hooks', body, $4, 0, id, now() from ev
		returning event_id::text`, org, flowID, sequence, state).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// startWebhooks runs the server's webhooks workers until the test ends.
func startWebhooks(t *testing.T, s *webtest.Server) {
	t.Helper()
	m, ok := s.Deps.Webhooks.(*webhooks.Module)
	if !ok {
		t.Fatal("the server's webhooks are not the module")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestConsoleRecoveryAndRedelivery: on an endpoint's page an admin
// recovers its failed deliveries and follows the recovery to done; a second
// request while one runs, a bad time and a disabled endpoint are refused on
// the page; on a flow's page an admin sends an event again. Viewers see
// both pages without the forms, and may not post them.
func TestConsoleRecoveryAndRedelivery(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	webtest.CreateTestEvents(t, ls.Pool)
	ctx := context.Background()
	s := ls.SignInStaffPair(t, "Replay Bank", "REP")
	org, other, admin, viewer, csrf, viewerCSRF := s.Org, s.Other, s.Admin, s.Viewer, s.AdminCSRF, s.ViewerCSRF
	const (
		endpoint = "019ab3c6-1111-7f80-9a1b-2c3d4e5f6a7d"
		disabled = "019ab3c6-2222-7f80-9a1b-2c3d4e5f6a7d"
		foreign  = "019ab3c6-3333-7f80-9a1b-2c3d4e5f6a7d"
	)
	webtest.InsertEndpoint(t, ls.Pool, org.ID, endpoint, "http://127.0.0.1:9/hooks", true)
	webtest.InsertEndpoint(t, ls.Pool, org.ID, disabled, "http://127.0.0.1:9/off", false)
	webtest.InsertEndpoint(t, ls.Pool, other.ID, foreign, "http://127.0.0.1:9/other", true)
	webtest.SeedFailedDeliveries(t, ls.Pool, org.ID, endpoint, "http://127.0.0.1:9/hooks", 25)
	page := "/console/webhooks/" + endpoint
	since := time.Now().UTC().Add(-2 * time.Hour).Format("2006-01-02T15:04")

	// The list links the page; the page offers the last 24 hours to admins.
	if p := admin.Get(ls.URL + "/console/webhooks"); !strings.Contains(p.Body, `href="`+page+`"`) {
		t.Fatalf("the list does not link the endpoint's page: %s", p.Body)
	}
	p := admin.Get(ls.URL + page)
	dayAgo := time.Now().UTC().Add(-24 * time.Hour).Format("2006-01-02T15:")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `action="`+page+`/recover"`) || !strings.Contains(p.Body, `value="`+dayAgo) ||
		!strings.Contains(p.Body, "No recoveries yet.") || strings.Contains(p.Body, `http-equiv="refresh"`) {
		t.Fatalf("the endpoint's page: %d %s", p.Status, p.Body)
	}
	if p := viewer.Get(ls.URL + page); p.Status != http.StatusOK || strings.Contains(p.Body, "/recover") {
		t.Fatalf("the viewer's page: %d %s", p.Status, p.Body)
	}
	if p := admin.Get(ls.URL + "/console/webhooks/" + disabled); !strings.Contains(p.Body, "Enable the endpoint to recover") ||
		strings.Contains(p.Body, `action="/console/webhooks/`+disabled+`/recover"`) {
		t.Fatalf("a disabled endpoint's page: %s", p.Body)
	}

	// Refused: a bad or future time, beside the field; a disabled endpoint;
	// viewers; a missing CSRF token; another organization's endpoint.
	for _, c := range []struct {
		name    string
		b       *formbrowser.Browser
		path    string
		form    url.Values
		status  int
		showing string
	}{
		{"not a time", admin, page + "/recover", url.Values{"csrf": {csrf}, "since": {"last tuesday"}}, http.StatusBadRequest, `id="since-error"`},
		{"no time", admin, page + "/recover", url.Values{"csrf": {csrf}, "since": {""}}, http.StatusBadRequest, "Is required"},
		{"in the future", admin, page + "/recover", url.Values{"csrf": {csrf}, "since": {"2999-01-01T00:00"}}, http.StatusBadRequest, "Must not be in the future."},
		{"disabled", admin, "/console/webhooks/" + disabled + "/recover", url.Values{"csrf": {csrf}, "since": {since}}, http.StatusConflict, "The endpoint is disabled"},
		{"a viewer", viewer, page + "/recover", url.Values{"csrf": {viewerCSRF}, "since": {since}}, http.StatusForbidden, ""},
		{"no CSRF token", admin, page + "/recover", url.Values{"since": {since}}, http.StatusForbidden, ""},
		{"another organization's", admin, "/console/webhooks/" + foreign + "/recover", url.Values{"csrf": {csrf}, "since": {since}}, http.StatusNotFound, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.b.Post(ls.URL+c.path, c.form)
			if p.Status != c.status || !strings.Contains(p.Body, c.showing) {
				t.Errorf("%d, want %d showing %q: %s", p.Status, c.status, c.showing, p.Body)
			}
		})
	}
	if n := countRows(t, ls.Pool, `select count(*) from webhook_recoveries`); n != 0 {
		t.Fatalf("%d recoveries after the refusals", n)
	}

	// Recover: the page shows it queued and reloads itself; a second
	// request is refused while it waits.
	p = admin.Post(ls.URL+page+"/recover", url.Values{"csrf": {csrf}, "since": {since}})
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.URL+page+"?notice=recovery_started") {
		t.Fatalf("recover: %d %s %s", p.Status, p.Location, p.Body)
	}
	p = admin.Get(p.Location)
	if !strings.Contains(p.Body, "The failed deliveries to 127.0.0.1:9 are being sent again") || !strings.Contains(p.Body, `http-equiv="refresh" content="2"`) ||
		!strings.Contains(p.Body, ">queued</span>") || !strings.Contains(p.Body, "0 of 25") || !strings.Contains(p.Body, "staff:ada") {
		t.Fatalf("the page after the request: %s", p.Body)
	}
	if p := admin.Post(ls.URL+page+"/recover", url.Values{"csrf": {csrf}, "since": {since}}); p.Status != http.StatusConflict ||
		!strings.Contains(p.Body, "A recovery of this endpoint is already queued") {
		t.Fatalf("a second request: %d %s", p.Status, p.Body)
	}

	// The workers run it to the end; the page stops reloading.
	startWebhooks(t, ls.Srv)
	deadline := testwait.Deadline(t)
	for p = admin.Get(ls.URL + page); !strings.Contains(p.Body, ">done</span>"); p = admin.Get(ls.URL + page) {
		if time.Now().After(deadline) {
			t.Fatalf("the recovery did not reach done: %s", p.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(p.Body, "25 of 25") || strings.Contains(p.Body, `http-equiv="refresh"`) {
		t.Fatalf("the page once done: %s", p.Body)
	}

	// A flow's events, each with Redeliver for admins.
	created, err := ls.Flows.Create(ctx, flows.Caller{OrganizationID: org.ID, ClientID: "c"},
		flows.NewFlow{NationalID: "ID-77", LastName: "Nordmann", RedirectURL: "https://bank.example/done"})
	if err != nil {
		t.Fatal(err)
	}
	sent := seedFlowEvent(t, ls.Pool, org.ID, created.FlowID, 1, "failed")
	flowPage := "/console/flows/" + created.FlowID
	redeliver := flowPage + "/events/" + sent + "/redeliver"
	if p := admin.Get(ls.URL + flowPage); !strings.Contains(p.Body, `action="`+redeliver+`"`) || !strings.Contains(p.Body, sent) {
		t.Fatalf("the flow's page: %s", p.Body)
	}
	if p := viewer.Get(ls.URL + flowPage); !strings.Contains(p.Body, sent) || strings.Contains(p.Body, "/redeliver") {
		t.Fatalf("the viewer's flow page: %s", p.Body)
	}
	if p := viewer.Post(ls.URL+redeliver, url.Values{"csrf": {viewerCSRF}}); p.Status != http.StatusForbidden {
		t.Errorf("a viewer redelivers: %d", p.Status)
	}
	p = admin.Post(ls.URL+redeliver, url.Values{"csrf": {csrf}})
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=redelivered") {
		t.Fatalf("redeliver: %d %s", p.Status, p.Body)
	}
	if p := admin.Get(p.Location); !strings.Contains(p.Body, "Event flow.created #1 is being sent again") {
		t.Fatalf("after redelivering: %s", p.Body)
	}
	// An event with nowhere to go says so.
	stopped := seedFlowEvent(t, ls.Pool, org.ID, created.FlowID, 2, "cancelled")
	p = admin.Post(ls.URL+flowPage+"/events/"+stopped+"/redeliver", url.Values{"csrf": {csrf}})
	if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=nothing_redelivered") {
		t.Fatalf("redeliver an event with nowhere to go: %d %s", p.Status, p.Location)
	}
	// Another flow's event is not this flow's to send.
	second, err := ls.Flows.Create(ctx, flows.Caller{OrganizationID: org.ID, ClientID: "c"},
		flows.NewFlow{NationalID: "ID-78", LastName: "Nordmann", RedirectURL: "https://bank.example/done"})
	if err != nil {
		t.Fatal(err)
	}
	if p := admin.Post(ls.URL+"/console/flows/"+second.FlowID+"/events/"+sent+"/redeliver", url.Values{"csrf": {csrf}}); p.Status != http.StatusNotFound {
		t.Errorf("another flow's event: %d", p.Status)
	}

	// The audit log names both, by the admin.
	entries, _, err := ls.Ident.AuditLog(ctx, org.ID, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, e := range entries {
		if e.Actor == "staff:ada" {
			found[e.Action] = e.Target + " " + e.Detail
		}
	}
	if got := found["webhook_endpoint.recover"]; !strings.HasPrefix(got, endpoint+" recovery ") || !strings.Contains(got, " of 25 failed deliveries since ") {
		t.Errorf("the recovery's entry: %q", got)
	}
	if got := found["event.redeliver"]; got != sent+" flow.created of flow "+created.FlowID+" to every destination (1 delivery)" {
		t.Errorf("the redelivery's entry: %q", got)
	}
}

func countRows(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
