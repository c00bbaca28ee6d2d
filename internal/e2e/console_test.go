package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// TestConsoleOverHTTP drives every console page and action through the real
// binary, with the success and the refusal of each: roles, CSRF, other
// organizations, bad input.
func TestConsoleOverHTTP(t *testing.T) {
	t.Parallel()
	e := startConsole(t)
	base := e.in.URL
	admin, viewer, stranger := newStaffBrowser(t, base), newStaffBrowser(t, base), newStaffBrowser(t, base)
	if p := admin.signIn("ada@acme.example"); p.Status != 200 || !strings.Contains(p.Body, "Acme Bank") || !strings.Contains(p.Body, "No active flows") {
		t.Fatalf("admin's first page: %d %s", p.Status, p.Body)
	}
	viewer.signIn("vic@acme.example")
	stranger.signIn("oscar@other.example")

	flow := e.createFlow(t, e.acmeAPI, "12345678901", "")
	flowPath := "/console/flows/" + flow.FlowID
	otherFlow := e.createFlow(t, e.otherAPI, "99999999999", "")

	t.Run("flows list masks national ids and shows only the organization's flows", func(t *testing.T) {
		p := admin.get("/console/flows")
		if p.Status != 200 || !strings.Contains(p.Body, flow.ReferenceID) || !strings.Contains(p.Body, "•••••••••01") ||
			strings.Contains(p.Body, "12345678901") || strings.Contains(p.Body, otherFlow.ReferenceID) {
			t.Fatalf("list: %d %s", p.Status, p.Body)
		}
		if p := stranger.get("/console/flows"); strings.Contains(p.Body, flow.ReferenceID) || !strings.Contains(p.Body, otherFlow.ReferenceID) {
			t.Fatalf("another organization's list: %s", p.Body)
		}
	})

	t.Run("filters and search", func(t *testing.T) {
		tests := []struct {
			query string
			found bool
			empty string
		}{
			{"?q=" + strings.ToLower(flow.ReferenceID), true, ""},
			{"?q=ACME-999", false, "No flows match"},
			{"?status=Unopened", true, ""},
			{"?status=Accepted", false, "No flows match"},
			{"?sandbox=false", true, ""},
			{"?sandbox=true", false, "No flows match"},
			{"?archived=true", false, "No archived flows"},
			// The list says which state it shows, and links the other.
			{"?status=Accepted", false, `Showing active flows only.`},
			{"?status=Accepted", false, `href="/console/flows?archived=true&amp;status=Accepted"`},
			{"?archived=true", false, `href="/console/flows">Show active flows</a>`},
		}
		for _, tt := range tests {
			p := viewer.get("/console/flows" + tt.query)
			if p.Status != 200 || strings.Contains(p.Body, ">"+flow.ReferenceID+"<") != tt.found || !strings.Contains(p.Body, tt.empty) {
				t.Errorf("%s: %d found=%v", tt.query, p.Status, !tt.found)
			}
		}
		for _, bad := range []string{"?status=Nope", "?sandbox=maybe", "?starting_after=not-an-id", "?starting_after=" + otherFlow.FlowID} {
			if p := viewer.get("/console/flows" + bad); p.Status != http.StatusBadRequest {
				t.Errorf("%s: %d, want 400", bad, p.Status)
			}
		}
	})

	t.Run("cursor pagination", func(t *testing.T) {
		for i := 0; i < 20; i++ {
			e.createFlow(t, e.acmeAPI, fmt.Sprintf("PAGE%02d", i), "")
		}
		first := viewer.get("/console/flows")
		next := regexp.MustCompile(`href="(/console/flows\?starting_after=[^"]+)" rel="next"|rel="next" href="([^"]+)"`).FindStringSubmatch(first.Body)
		if next == nil || strings.Contains(first.Body, `rel="prev"`) || strings.Count(first.Body, "<tr>") != 21 {
			t.Fatalf("first page: %s", first.Body)
		}
		second := viewer.get(unescapeAttr(next[1] + next[2]))
		if second.Status != 200 || !strings.Contains(second.Body, ">"+flow.ReferenceID+"<") || !strings.Contains(second.Body, `rel="prev"`) ||
			strings.Contains(second.Body, `rel="next"`) {
			t.Fatalf("second page: %d %s", second.Status, second.Body)
		}
	})

	t.Run("detail of the organization's flow, 404 for anyone else's", func(t *testing.T) {
		p := viewer.get(flowPath)
		if p.Status != 200 || !strings.Contains(p.Body, "•••••••••01") || strings.Contains(p.Body, "12345678901") ||
			!strings.Contains(p.Body, "consent") || strings.Contains(p.Body, "/reveal") || strings.Contains(p.Body, "/delete") {
			t.Fatalf("viewer's detail: %d %s", p.Status, p.Body)
		}
		if p := admin.get(flowPath); !strings.Contains(p.Body, flowPath+"/delete") || !strings.Contains(p.Body, flowPath+"/reveal") {
			t.Fatalf("admin's detail lacks the admin actions: %s", p.Body)
		}
		for _, path := range []string{"/console/flows/" + otherFlow.FlowID, "/console/flows/nope", "/console/flows/" + otherFlow.FlowID + "/delete"} {
			if p := admin.get(path); p.Status != http.StatusNotFound {
				t.Errorf("%s: %d, want 404", path, p.Status)
			}
		}
		if p := stranger.get(flowPath); p.Status != http.StatusNotFound || strings.Contains(p.Body, flow.ReferenceID) {
			t.Errorf("another organization's admin: %d", p.Status)
		}
		if p := stranger.post(flowPath+"/delete", nil); p.Status != http.StatusNotFound {
			t.Errorf("another organization's admin deletes: %d", p.Status)
		}
	})

	t.Run("viewers cannot change anything, even by posting the form", func(t *testing.T) {
		for _, path := range []string{flowPath + "/cancel", flowPath + "/delete", "/console/credentials/clients/new",
			"/console/credentials/webhook-secret/rotate", "/console/audit"} {
			if p := viewer.get(path); p.Status != http.StatusForbidden {
				t.Errorf("viewer GET %s: %d", path, p.Status)
			}
		}
		for _, path := range []string{flowPath + "/reveal", flowPath + "/cancel", flowPath + "/delete", "/console/credentials/clients",
			"/console/credentials/webhook-secret/reveal", "/console/credentials/webhook-secret/rotate", "/console/settings"} {
			if p := viewer.post(path, url.Values{"name": {"x"}, "scopes": {"flows:read"}, "reference_prefix": {"HACK"}}); p.Status != http.StatusForbidden {
				t.Errorf("viewer POST %s: %d", path, p.Status)
			}
		}
		if p := viewer.get("/console/settings"); p.Status != 200 || !strings.Contains(p.Body, "Only admins can change") {
			t.Errorf("viewer's settings: %d", p.Status)
		}
		e.waitForFlow(t, e.acmeAPI, flow.FlowID, "still active", func(f consoleAPIFlow) bool { return f.Flow.Status == "active" })
	})

	t.Run("every POST needs the session's CSRF token", func(t *testing.T) {
		for _, token := range []string{"", "forged", viewer.csrf} {
			if p := admin.post(flowPath+"/delete", url.Values{"csrf": {token}}); p.Status != http.StatusForbidden {
				t.Errorf("delete with CSRF %q: %d", token, p.Status)
			}
		}
		if p := newStaffBrowser(t, base).post(flowPath+"/delete", url.Values{"csrf": {admin.csrf}}); p.Status != http.StatusUnauthorized {
			t.Errorf("delete without a session: %d", p.Status)
		}
	})

	t.Run("reveal is for admins and audited", func(t *testing.T) {
		p := admin.post(flowPath+"/reveal", nil)
		if p.Status != 200 || !strings.Contains(p.Body, "12345678901") || p.Body == "" {
			t.Fatalf("reveal: %d %s", p.Status, p.Body)
		}
		audit := admin.get("/console/audit")
		if !strings.Contains(audit.Body, "flow.reveal_national_id") || !strings.Contains(audit.Body, "staff:ada@acme.example") ||
			strings.Contains(audit.Body, "12345678901") {
			t.Fatalf("audit after reveal: %s", audit.Body)
		}
	})

	t.Run("cancel with a confirmation step", func(t *testing.T) {
		c := e.createFlow(t, e.acmeAPI, "CANCEL1", "")
		path := "/console/flows/" + c.FlowID + "/cancel"
		if p := admin.get(path); p.Status != 200 || !strings.Contains(p.Body, `action="`+path+`"`) {
			t.Fatalf("confirmation: %d %s", p.Status, p.Body)
		}
		if p := admin.post(path, nil); p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=cancelled") {
			t.Fatalf("cancel: %d %s", p.Status, p.Location)
		}
		e.waitForFlow(t, e.acmeAPI, c.FlowID, "cancelled", func(f consoleAPIFlow) bool { return f.Flow.Status == "cancelled" })
		if p := admin.post(path, nil); p.Status != http.StatusConflict {
			t.Fatalf("second cancel: %d", p.Status)
		}
		wantAudited(t, admin, "flow.cancel")
	})

	t.Run("receipts to download, and withdrawal with a reason", func(t *testing.T) {
		w := e.createFlow(t, e.acmeAPI, "WITHDRAW1", "")
		var created struct {
			Links struct {
				Consent struct{ Href string } `json:"consent"`
			} `json:"_links"`
		}
		call(t, e.acmeAPI, "GET", base+"/api/flows/"+w.FlowID, "", &created)
		formbrowser.Consent(t, base, created.Links.Consent.Href, "WITHDRAW1", "accept")
		path := "/console/flows/" + w.FlowID
		page := admin.get(path)
		receipt := regexp.MustCompile(regexp.QuoteMeta(path) + `/receipts/[0-9a-f-]{36}`).FindString(page.Body)
		if page.Status != 200 || receipt == "" || !strings.Contains(page.Body, path+"/withdraw") {
			t.Fatalf("the accepted flow's page: %d %s", page.Status, page.Body)
		}
		for name, b := range map[string]*staffBrowser{"admin": admin, "viewer": viewer} {
			if r := b.get(receipt); r.Status != 200 || strings.Count(r.Body, ".") != 2 {
				t.Errorf("%s downloads the receipt: %d %q", name, r.Status, r.Body)
			}
		}
		if r := stranger.get(receipt); r.Status != http.StatusNotFound {
			t.Errorf("another organization's admin downloads the receipt: %d", r.Status)
		}
		if p := viewer.get(path + "/withdraw"); p.Status != http.StatusForbidden {
			t.Errorf("viewer's withdrawal page: %d", p.Status)
		}
		if p := viewer.post(path+"/withdraw", url.Values{"reason": {"viewer"}}); p.Status != http.StatusForbidden {
			t.Errorf("viewer withdraws: %d", p.Status)
		}
		if p := admin.get(path + "/withdraw"); p.Status != 200 || !strings.Contains(p.Body, `name="reason"`) {
			t.Fatalf("the confirmation: %d %s", p.Status, p.Body)
		}
		if p := admin.post(path+"/withdraw", url.Values{"reason": {"  "}}); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "Give a reason") {
			t.Fatalf("a withdrawal without a reason: %d", p.Status)
		}
		p := admin.post(path+"/withdraw", url.Values{"reason": {"The customer called, case 4711."}})
		if p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=withdrawn") {
			t.Fatalf("withdraw: %d %s", p.Status, p.Location)
		}
		var got struct {
			Flow struct {
				NumAttachments int                     `json:"numAttachments"`
				Consent        struct{ Status string } `json:"consent"`
			} `json:"flow"`
		}
		call(t, e.acmeAPI, "GET", base+"/api/flows/"+w.FlowID, "", &got)
		if got.Flow.Consent.Status != "Withdrawn" || got.Flow.NumAttachments != 2 {
			t.Fatalf("after the console's withdrawal the API shows %+v", got.Flow)
		}
		page = admin.get(path)
		if n := len(regexp.MustCompile(regexp.QuoteMeta(path)+`/receipts/[0-9a-f-]{36}`).FindAllString(page.Body, -1)); n != 2 ||
			strings.Contains(page.Body, path+"/withdraw") {
			t.Fatalf("the withdrawn flow's page lists %d receipts: %s", n, page.Body)
		}
		if p := admin.post(path+"/withdraw", url.Values{"reason": {"again"}}); p.Status != http.StatusConflict {
			t.Fatalf("a second withdrawal: %d", p.Status)
		}
		if audit := admin.get("/console/audit"); !strings.Contains(audit.Body, "flow.withdraw") || !strings.Contains(audit.Body, "case 4711") {
			t.Fatalf("the audit log lacks the withdrawal and its reason")
		}
	})

	t.Run("delete lands in the deletions log and is gone from the API", func(t *testing.T) {
		d := e.createFlow(t, e.acmeAPI, "DELETE1", "")
		path := "/console/flows/" + d.FlowID + "/delete"
		if p := admin.get(path); p.Status != 200 || !strings.Contains(p.Body, "Delete for good") {
			t.Fatalf("confirmation: %d", p.Status)
		}
		p := admin.post(path, nil)
		if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, base+"/console/flows?notice=deleted") {
			t.Fatalf("delete: %d %s", p.Status, p.Location)
		}
		if list := admin.get(p.Location); !strings.Contains(list.Body, "Flow "+d.ReferenceID+" was deleted") {
			t.Fatalf("notice after delete: %s", list.Body)
		}
		log := viewer.get("/console/deletions")
		if !strings.Contains(log.Body, d.ReferenceID) || !strings.Contains(log.Body, d.FlowID) || !strings.Contains(log.Body, "staff:ada@acme.example") {
			t.Fatalf("deletions: %s", log.Body)
		}
		if other := stranger.get("/console/deletions"); strings.Contains(other.Body, d.FlowID) {
			t.Fatalf("another organization sees the deletion")
		}
		if resp := call(t, e.acmeAPI, "GET", base+"/api/flows/"+d.FlowID, "", nil); resp.StatusCode != 404 {
			t.Fatalf("API after delete: %d", resp.StatusCode)
		}
		if p := admin.post(path, nil); p.Status != http.StatusNotFound {
			t.Fatalf("second delete: %d", p.Status)
		}
		wantAudited(t, admin, "flow.delete")
	})

	t.Run("retry an incident of a failing webhook receiver", func(t *testing.T) {
		rcv := newFlakyReceiver(t, 500)
		f := e.createFlow(t, e.acmeAPI, "HOOK1", rcv.srv.URL+"/hooks")
		e.waitForFlow(t, e.acmeAPI, f.FlowID, "an incident", func(f consoleAPIFlow) bool { return f.Flow.HasIncidents })
		path := "/console/flows/" + f.FlowID
		p := admin.get(path)
		retry := regexp.MustCompile(`action="(` + path + `/incidents/[0-9a-f-]+/retry)"`).FindStringSubmatch(p.Body)
		if retry == nil || !strings.Contains(p.Body, "Open incidents") || !strings.Contains(p.Body, ">500<") {
			t.Fatalf("detail with an incident: %s", p.Body)
		}
		if list := viewer.get("/console/flows?q=" + f.ReferenceID); !strings.Contains(list.Body, "1 incident") {
			t.Fatalf("list lacks the incident badge: %s", list.Body)
		}
		if p := viewer.post(retry[1], nil); p.Status != http.StatusForbidden {
			t.Fatalf("viewer retries: %d", p.Status)
		}
		if p := stranger.post(retry[1], nil); p.Status != http.StatusNotFound {
			t.Fatalf("another organization retries: %d", p.Status)
		}
		rcv.status.Store(204)
		// One retry is enough, even one that meets the third attempt still
		// running: the retry then queues a delivery of its own.
		hits := rcv.hits.Load()
		if p := admin.post(retry[1], nil); p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=retried") {
			t.Fatalf("retry: %d %s", p.Status, p.Location)
		}
		testwait.For(t, "the receiver to be called again after the retry", func() (bool, string) {
			return rcv.hits.Load() > hits, fmt.Sprintf("%d calls, as many as before the retry", rcv.hits.Load())
		})
		e.waitForFlow(t, e.acmeAPI, f.FlowID, "the incident resolved", func(f consoleAPIFlow) bool { return !f.Flow.HasIncidents })
		if p := admin.get(path); strings.Contains(p.Body, "Open incidents") || !strings.Contains(p.Body, ">204<") {
			t.Fatalf("detail after retry: %s", p.Body)
		}
		wantAudited(t, admin, "task.retry")
	})

	t.Run("API clients: create, use, rotate, revoke", func(t *testing.T) {
		if p := admin.post("/console/credentials/clients", url.Values{"name": {"Backend"}}); p.Status != http.StatusBadRequest ||
			!strings.Contains(p.Body, "Choose at least one scope") || !strings.Contains(p.Body, `value="Backend"`) {
			t.Fatalf("no scopes: %d %s", p.Status, p.Body)
		}
		if p := admin.post("/console/credentials/clients", url.Values{"name": {"Backend"}, "scopes": {"flows:admin"}}); p.Status != http.StatusBadRequest ||
			!strings.Contains(p.Body, "Unknown scope") {
			t.Fatalf("unknown scope: %d %s", p.Status, p.Body)
		}
		p := admin.post("/console/credentials/clients", url.Values{"name": {"Backend"}, "scopes": {"flows:read"}, "sandbox": {"true"}})
		id := regexp.MustCompile(`<code>(fc_[A-Za-z0-9_]+)</code>`).FindStringSubmatch(p.Body)
		secret := regexp.MustCompile(`id="secret-value">([^<]+)<`).FindStringSubmatch(p.Body)
		if p.Status != http.StatusCreated || id == nil || secret == nil || !strings.Contains(p.Body, "data-copy") {
			t.Fatalf("create: %d %s", p.Status, p.Body)
		}
		token, status := tokenStatus(t, base, id[1], secret[1])
		if status != 200 || apiStatus(t, base, token) != 200 {
			t.Fatalf("new client's token: %d", status)
		}
		creds := admin.get("/console/credentials")
		if !strings.Contains(creds.Body, id[1]) || strings.Contains(creds.Body, secret[1]) || !strings.Contains(creds.Body, "Backend") {
			t.Fatalf("credentials list: %s", creds.Body)
		}
		if v := viewer.get("/console/credentials"); !strings.Contains(v.Body, id[1]) || strings.Contains(v.Body, "/revoke") {
			t.Fatalf("viewer's credentials: %s", v.Body)
		}
		if p := stranger.get("/console/credentials/clients/" + id[1] + "/revoke"); p.Status != http.StatusNotFound {
			t.Fatalf("another organization's revoke page: %d", p.Status)
		}
		if p := stranger.post("/console/credentials/clients/"+id[1]+"/rotate", nil); p.Status != http.StatusNotFound {
			t.Fatalf("another organization rotates: %d", p.Status)
		}

		rot := admin.post("/console/credentials/clients/"+id[1]+"/rotate", nil)
		newSecret := regexp.MustCompile(`id="secret-value">([^<]+)<`).FindStringSubmatch(rot.Body)
		if rot.Status != 200 || newSecret == nil || newSecret[1] == secret[1] {
			t.Fatalf("rotate: %d %s", rot.Status, rot.Body)
		}
		if _, status := tokenStatus(t, base, id[1], secret[1]); status != http.StatusUnauthorized {
			t.Fatalf("old secret after rotation: %d", status)
		}
		token, status = tokenStatus(t, base, id[1], newSecret[1])
		if status != 200 {
			t.Fatalf("new secret: %d", status)
		}

		revoke := "/console/credentials/clients/" + id[1] + "/revoke"
		if p := admin.get(revoke); p.Status != 200 || !strings.Contains(p.Body, "Revoke client") {
			t.Fatalf("revoke confirmation: %d", p.Status)
		}
		if p := admin.post(revoke, nil); p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "notice=revoked") {
			t.Fatalf("revoke: %d %s", p.Status, p.Location)
		}
		if s := apiStatus(t, base, token); s != http.StatusUnauthorized {
			t.Fatalf("revoked client's token: %d", s)
		}
		if _, status := tokenStatus(t, base, id[1], newSecret[1]); status != http.StatusUnauthorized {
			t.Fatalf("revoked client gets a token: %d", status)
		}
		wantAudited(t, admin, "client.create", "client.rotate_secret", "client.revoke")
	})

	t.Run("webhook secret: reveal and rotate", func(t *testing.T) {
		p := admin.post("/console/credentials/webhook-secret/reveal", nil)
		if p.Status != 200 || !strings.Contains(p.Body, e.acme.WebhookSecret) {
			t.Fatalf("reveal: %d %s", p.Status, p.Body)
		}
		if p := admin.get("/console/credentials/webhook-secret/rotate"); p.Status != 200 || !strings.Contains(p.Body, "24 hours") {
			t.Fatalf("rotate confirmation: %d", p.Status)
		}
		p = admin.post("/console/credentials/webhook-secret/rotate", nil)
		s := regexp.MustCompile(`id="secret-value">(whsec_[^<]+)<`).FindStringSubmatch(p.Body)
		if p.Status != 200 || s == nil || s[1] == e.acme.WebhookSecret {
			t.Fatalf("rotate: %d %s", p.Status, p.Body)
		}
		if p := stranger.post("/console/credentials/webhook-secret/reveal", nil); strings.Contains(p.Body, s[1]) {
			t.Fatal("another organization sees the secret")
		}
		wantAudited(t, admin, "webhook_secret.reveal", "webhook_secret.rotate")
	})

	t.Run("settings are validated and used by new flows", func(t *testing.T) {
		bad := admin.post("/console/settings", url.Values{"reference_prefix": {"a!"}, "organization_number": {"123"},
			"redirect_origins": {"https://bank.example\nftp://nope.example\nhttps://bank.example/path"}})
		if bad.Status != http.StatusBadRequest || !strings.Contains(bad.Body, "2 to 8 letters") || !strings.Contains(bad.Body, "ftp://nope.example") ||
			!strings.Contains(bad.Body, "without a path") {
			t.Fatalf("bad settings: %d %s", bad.Status, bad.Body)
		}
		ok := admin.post("/console/settings", url.Values{"reference_prefix": {"acm2"}, "organization_number": {"123456789"},
			"redirect_origins": {"https://bank.example/\n\nhttps://BANK.example\n"}})
		if ok.Status != http.StatusSeeOther {
			t.Fatalf("save: %d %s", ok.Status, ok.Body)
		}
		page := admin.get(ok.Location)
		if !strings.Contains(page.Body, "Settings saved") || !strings.Contains(page.Body, `value="ACM2"`) || !strings.Contains(page.Body, ">https://bank.example</textarea>") {
			t.Fatalf("after save: %s", page.Body)
		}
		if f := e.createFlow(t, e.acmeAPI, "PREFIX1", ""); !strings.HasPrefix(f.ReferenceID, "ACM2-") {
			t.Fatalf("new flow's reference: %s", f.ReferenceID)
		}
		resp := call(t, e.acmeAPI, "POST", base+"/api/flows", `{"nationalId":"X1","lastName":"N","redirectUrl":"https://evil.example/x"}`, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a redirect outside the allow-list: %d", resp.StatusCode)
		}
		if p := stranger.get("/console/settings"); strings.Contains(p.Body, "ACM2") {
			t.Fatal("another organization sees the settings")
		}
		wantAudited(t, admin, "settings.update")
	})

	// Each subtest above checks that the audit log has what it did; this one
	// checks that the log, whatever it holds by now, shows nothing secret.
	t.Run("the audit log shows nothing secret, and only to its organization", func(t *testing.T) {
		admin.post("/console/credentials/webhook-secret/reveal", nil)
		wantAudited(t, admin, "webhook_secret.reveal")
		p := admin.get("/console/audit")
		if strings.Contains(p.Body, "whsec_") || strings.Contains(p.Body, "fcs_") || strings.Contains(p.Body, "12345678901") {
			t.Errorf("audit log shows a secret or national id: %s", p.Body)
		}
		if other := stranger.get("/console/audit"); strings.Contains(other.Body, "ada@acme.example") {
			t.Error("another organization sees the audit log")
		}
	})
}

// wantAudited fails the test unless the organization's audit log, as b sees
// it, has an entry of each action.
func wantAudited(t *testing.T, b *staffBrowser, actions ...string) {
	t.Helper()
	p := b.get("/console/audit")
	for _, action := range actions {
		if !strings.Contains(p.Body, action) {
			t.Errorf("the audit log lacks %s:\n%s", action, p.Body)
		}
	}
}

// unescapeAttr undoes the escaping of an attribute value.
func unescapeAttr(s string) string { return strings.ReplaceAll(s, "&amp;", "&") }
