package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
)

// acceptWithoutBrowser accepts a flow on its consent link as a browser
// would without proof of identity (FLOWD_CONSENT_AUTH=none): it opens the
// link, then posts the decision form with its CSRF token.
func acceptWithoutBrowser(t *testing.T, base, link string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	form := regexp.MustCompile(`<form method="post" action="([^"]+)" class="decision">\s*<input type="hidden" name="([^"]+)" value="([^"]+)"`).FindStringSubmatch(string(page))
	if form == nil {
		t.Fatalf("the consent page has no decision form:\n%s", page)
	}
	action, _ := url.Parse(link)
	action, _ = action.Parse(strings.ReplaceAll(form[1], "&amp;", "&"))
	req, _ := http.NewRequest("POST", action.String(), strings.NewReader(url.Values{form[2]: {form[3]}, "decision": {"accept"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", base)
	if resp, err = hc.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("accept: %d", resp.StatusCode)
	}
}

// TestTheUseLedgerAndTheExpiringNoticeReachAnEndpoint: an endpoint that
// takes flow.used and flow.expiring receives both, signed; flow.used
// carries the use (without its free text, which the API gives) and nothing
// personal, and goes to the endpoint only, not to the flow's own webhookUrl,
// which gets flow.expiring. A use after the withdrawal is refused.
func TestTheUseLedgerAndTheExpiringNoticeReachAnEndpoint(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"), flowdtest.WithEnv("FLOWD_ALLOW_INSECURE_URLS", "true"),
		flowdtest.WithEnv("FLOWD_MAINTENANCE_INTERVAL", "100ms"), flowdtest.WithEnv("FLOWD_CONSENT_EXPIRING_NOTICE", "48h"))
	acme, api := createOrgAndClient(t, in, "Acme Bank", "ACME")
	endpoint, own := newReceiver(t, acme.WebhookSecret), newReceiver(t, acme.WebhookSecret)
	if resp := call(t, api, "POST", in.URL+"/api/webhook-endpoints",
		`{"url":"`+endpoint.srv.URL+`/ledger","eventTypes":["flow.used","flow.expiring"]}`, nil); resp.StatusCode != 201 {
		t.Fatalf("endpoint: %d", resp.StatusCode)
	}
	// A definition valid for a day, well within the two days' notice.
	if resp := call(t, api, "POST", in.URL+"/api/flow-definitions", `{"id":"loan","title":{"en":"Share your income","nb":"Del inntekten din"},
		"purpose":{"en":"We check it.","nb":"Vi sjekker den."},"dataCategories":[{"en":"Income","nb":"Inntekt"}],"validity":"P1D"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("definition: %d", resp.StatusCode)
	}
	var created struct {
		FlowID string `json:"flowId"`
		Links  struct {
			Consent struct{ Href string } `json:"consent"`
		} `json:"_links"`
	}
	call(t, api, "POST", in.URL+"/api/flows", `{"nationalId":"12345678901","lastName":"Nordmann","redirectUrl":"https://bank.example/done",
		"flowDefinitionId":"loan","webhookUrl":"`+own.srv.URL+`/hooks"}`, &created)
	acceptWithoutBrowser(t, in.URL, created.Links.Consent.Href)

	var use map[string]any
	if resp := call(t, api, "POST", in.URL+"/api/flows/"+created.FlowID+"/uses",
		`{"action":"fetched income 2025","dataCategories":["Inntekt"],"reference":"case 4711"}`, &use); resp.StatusCode != 201 {
		t.Fatalf("use: %d %v", resp.StatusCode, use)
	}
	used := endpoint.waitFor("flow.used")
	data := used["data"].(map[string]any)
	got := data["use"].(map[string]any)
	if data["flowId"] != created.FlowID || data["status"] != "Accepted" || got["id"] != use["id"] || use["action"] != "fetched income 2025" ||
		use["reference"] != "case 4711" || got["usedAt"] != use["usedAt"] || !slices.Equal(got["dataCategories"].([]any), []any{"Inntekt"}) ||
		use["resource"] != nil || got["resource"] != nil {
		t.Fatalf("flow.used: %v, the use %v", used, use)
	}
	// The use's free text may be about the person: the event leaves it to the API.
	if body := mustJSON(t, used); strings.Contains(body, "12345678901") || strings.Contains(body, "Nordmann") ||
		strings.Contains(body, "fetched income") || strings.Contains(body, "case 4711") {
		t.Fatalf("flow.used carries personal data or the use's text: %v", used)
	}
	expiring := endpoint.waitFor("flow.expiring")
	if d := expiring["data"].(map[string]any); d["flowId"] != created.FlowID || d["status"] != "Accepted" {
		t.Fatalf("flow.expiring: %v", expiring)
	}
	own.waitFor("flow.expiring")

	// flow.used had one delivery, the endpoint's.
	var events struct {
		Data []struct{ ID string } `json:"data"`
	}
	call(t, api, "GET", in.URL+"/api/events?type=flow.used&flowId="+created.FlowID, "", &events)
	if len(events.Data) != 1 {
		t.Fatalf("%d flow.used events, want 1", len(events.Data))
	}
	var detail struct {
		Deliveries []struct{ URL string } `json:"deliveries"`
	}
	call(t, api, "GET", in.URL+"/api/events/"+events.Data[0].ID, "", &detail)
	if len(detail.Deliveries) != 1 || detail.Deliveries[0].URL != endpoint.srv.URL+"/ledger" {
		t.Fatalf("flow.used deliveries %+v, want only the endpoint's", detail.Deliveries)
	}
	if slices.Contains(own.eventTypes(), "flow.used") {
		t.Fatalf("the flow's own webhookUrl got flow.used: %v", own.eventTypes())
	}

	if resp := call(t, api, "POST", in.URL+"/api/flows/"+created.FlowID+"/withdraw", `{"reason":"Asked by phone."}`, nil); resp.StatusCode != 200 {
		t.Fatalf("withdraw: %d", resp.StatusCode)
	}
	if resp := call(t, api, "POST", in.URL+"/api/flows/"+created.FlowID+"/uses", `{"action":"too late"}`, nil); resp.StatusCode != 409 {
		t.Fatalf("a use after the withdrawal: %d, want 409", resp.StatusCode)
	}
}

// mustJSON is v as JSON.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
