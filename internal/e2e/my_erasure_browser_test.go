package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestAskingToBeErasedFromMyPage: on their own page the person asks the
// organization to erase them; the organization's endpoint receives
// subject.erasure_requested naming them only by their receipt subject and
// a reference, and the page says when they asked. Once the organization
// has erased them, their flow is gone from the page, which says when it
// was done.
func TestAskingToBeErasedFromMyPage(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t)
	ctx := e.b.Ctx
	endpoint := newReceiver(t, e.org.WebhookSecret)
	if resp := call(t, e.api, "POST", e.in.URL+"/api/webhook-endpoints",
		`{"url":"`+endpoint.srv.URL+`/privacy","eventTypes":["subject.erasure_requested","subject.erased"]}`, nil); resp.StatusCode != 201 {
		t.Fatalf("endpoint: %d", resp.StatusCode)
	}
	flow := e.createFlow(t, false)
	acceptIn(t, e, flow.Links.Consent.Href, rightID, "substantial")

	run(t, ctx, chromedp.Navigate(e.in.URL+"/my?lang=en"))
	p := waitPage(t, ctx, "Ask to have my data erased")
	if !strings.Contains(p.text, flow.ReferenceID) || strings.Contains(p.text, "You asked to have your data erased") {
		t.Fatalf("/my before asking:\n%s", p.text)
	}
	run(t, ctx, chromedp.Click(`.my-erasure[data-organization-id="`+e.org.ID+`"] button`, chromedp.ByQuery))
	p = waitPage(t, ctx, "You asked to have your data erased on")
	e.b.CheckAccessibility("/my after asking to be erased")
	shot(t, ctx, "my-erasure-asked")

	asked := endpoint.waitFor("subject.erasure_requested")
	raw, _ := json.Marshal(asked)
	data, _ := asked["data"].(map[string]any)
	if data["reference"] != flow.ReferenceID || data["organizationId"] != e.org.ID || data["subject"] == "" || strings.Contains(string(raw), rightID) {
		t.Fatalf("subject.erasure_requested: %s", raw)
	}

	var erasure struct {
		ID      string `json:"id"`
		Subject string `json:"subject"`
	}
	if resp := call(t, e.api, "POST", e.in.URL+"/api/erasures", `{"nationalId":"`+rightID+`"}`, &erasure); resp.StatusCode != 201 {
		t.Fatalf("erase: %d", resp.StatusCode)
	}
	if erasure.Subject != data["subject"] {
		t.Errorf("the erasure's subject %q is not the request's %q", erasure.Subject, data["subject"])
	}
	erased := endpoint.waitFor("subject.erased")
	if d, _ := erased["data"].(map[string]any); d["erasureId"] != erasure.ID || d["flowCount"] != float64(1) {
		t.Errorf("subject.erased: %v", erased)
	}
	run(t, ctx, chromedp.Navigate(e.in.URL+"/my?lang=en"))
	p = waitPage(t, ctx, "Your data was erased on")
	if strings.Contains(p.text, flow.ReferenceID) || !strings.Contains(p.text, "Acme Bank") {
		t.Fatalf("/my after the erasure:\n%s", p.text)
	}
	shot(t, ctx, "my-erasure-done")
}
