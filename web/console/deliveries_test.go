package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flowd/flowd/web/internal/webtest"
)

// TestConsoleDeliveries: the deliveries page counts an organization's
// deliveries not delivered and lists those that failed, only its own; an
// admin retries one, which goes back to pending and into the audit log; a
// viewer sees the page without the retry and may not post it, and another
// organization's delivery is not found.
func TestConsoleDeliveries(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	webtest.CreateTestEvents(t, ls.Pool)
	ctx := context.Background()
	s := ls.SignInStaffPair(t, "Backlog Bank", "BLG")
	const (
		endpoint = "019ab3c6-4444-7f80-9a1b-2c3d4e5f6a7d"
		foreign  = "019ab3c6-5555-7f80-9a1b-2c3d4e5f6a7d"
	)
	webtest.InsertEndpoint(t, ls.Pool, s.Org.ID, endpoint, "http://127.0.0.1:9/backlog", true)
	webtest.InsertEndpoint(t, ls.Pool, s.Other.ID, foreign, "http://127.0.0.1:9/elsewhere", true)
	webtest.SeedFailedDeliveries(t, ls.Pool, s.Org.ID, endpoint, "http://127.0.0.1:9/backlog", 3)
	webtest.SeedFailedDeliveries(t, ls.Pool, s.Other.ID, foreign, "http://127.0.0.1:9/elsewhere", 1)
	deliveryOf := func(org string) string {
		var id string
		if err := ls.Pool.QueryRow(ctx, `select id::text from webhook_events where organization_id = $1 limit 1`, org).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	mine, theirs := deliveryOf(s.Org.ID), deliveryOf(s.Other.ID)
	page := ls.URL + "/console/webhooks/deliveries"

	p := s.Viewer.Get(page)
	if p.Status != http.StatusOK || strings.Count(p.Body, `id="delivery-`) != 3 || !strings.Contains(p.Body, "http://127.0.0.1:9/backlog") ||
		strings.Contains(p.Body, "elsewhere") || !strings.Contains(p.Body, "<dt>Gave up</dt><dd>3</dd>") || strings.Contains(p.Body, "/retry") {
		t.Fatalf("the viewer's page: %d %s", p.Status, p.Body)
	}
	var flowID string
	if err := ls.Pool.QueryRow(ctx, `select flow_id from webhook_events where organization_id = $1 and id = $2`, s.Org.ID, mine).Scan(&flowID); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Body, `href="/console/flows/`+flowID+`"`) {
		t.Fatalf("a delivery to an endpoint does not link its flow %s: %s", flowID, p.Body)
	}
	if p := s.Admin.Get(ls.URL + "/console/webhooks"); !strings.Contains(p.Body, `href="/console/webhooks/deliveries"`) {
		t.Fatalf("the webhooks page does not link the deliveries: %s", p.Body)
	}
	if p := s.Admin.Get(page); !strings.Contains(p.Body, "/console/webhooks/deliveries/"+mine+"/retry") {
		t.Fatalf("the admin's page offers no retry of %s: %s", mine, p.Body)
	}
	retry := func(id string) string { return page + "/" + id + "/retry" }
	if p := s.Viewer.Post(retry(mine), url.Values{"csrf": {s.ViewerCSRF}}); p.Status != http.StatusForbidden {
		t.Fatalf("a viewer's retry: %d", p.Status)
	}
	if p := s.Admin.Post(retry(theirs), url.Values{"csrf": {s.AdminCSRF}}); p.Status != http.StatusNotFound {
		t.Fatalf("a retry of another organization's delivery: %d", p.Status)
	}
	if p := s.Admin.Post(retry(mine), url.Values{"csrf": {s.AdminCSRF}}); p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=delivery_retried") {
		t.Fatalf("the admin's retry: %d %s", p.Status, p.Location)
	}
	var state string
	var audited int
	if err := ls.Pool.QueryRow(ctx, `select state from webhook_events where organization_id = $1 and id = $2`, s.Org.ID, mine).Scan(&state); err != nil || state != "pending" {
		t.Fatalf("the retried delivery is %q (%v), want pending", state, err)
	}
	if err := ls.Pool.QueryRow(ctx, `select count(*) from audit_log where organization_id = $1 and action = 'event.redeliver' and detail like '%delivery '||$2`,
		s.Org.ID, mine).Scan(&audited); err != nil || audited != 1 {
		t.Fatalf("audit entries of the retry: %d (%v)", audited, err)
	}
	if p := s.Viewer.Get(page); !strings.Contains(p.Body, "<dt>Queued</dt><dd>1</dd>") || !strings.Contains(p.Body, "<dt>Gave up</dt><dd>2</dd>") {
		t.Fatalf("the page after the retry: %s", p.Body)
	}
}
