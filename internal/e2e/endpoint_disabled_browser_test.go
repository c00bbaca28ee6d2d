package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/browsertest"
	"github.com/flowd/flowd/internal/flowdtest"
)

// TestDisabledEndpointBannerInABrowser: with a disable window of a second,
// an endpoint registered over the API that keeps failing is disabled by
// flowd; the console's pages show a banner naming it that leads to the
// Webhooks page, where the reason shows and Enable ends the banner.
func TestDisabledEndpointBannerInABrowser(t *testing.T) {
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_WEBHOOK_DISABLE_AFTER", "1s"),
		flowdtest.WithEnv("FLOWD_WEBHOOK_RETRY_SCHEDULE", strings.TrimSuffix(strings.Repeat("200ms,", 30), ",")),
		flowdtest.WithEnv("FLOWD_ALLOW_INSECURE_URLS", "true"))
	e := &consoleEnv{in: in}
	e.acme, e.acmeAPI = createOrgAndClient(t, in, "Acme Bank", "ACME")
	e.staff(t, e.acme.ID, "ada@acme.example", "Ada Admin", "admin")
	rcv := newFlakyReceiver(t, 503)
	var ep struct {
		ID string `json:"id"`
	}
	if resp := call(t, e.acmeAPI, "POST", in.URL+"/api/webhook-endpoints",
		`{"url":"`+rcv.srv.URL+`/hooks?token=secret","description":"Loan system"}`, &ep); resp.StatusCode != 201 {
		t.Fatalf("register the endpoint: %d", resp.StatusCode)
	}
	e.createFlow(t, e.acmeAPI, "12345678901", "") // its flow.created goes to the endpoint, and fails

	deadline := time.Now().Add(30 * time.Second)
	for {
		var got struct {
			DisabledReason *string `json:"disabledReason"`
		}
		call(t, e.acmeAPI, "GET", in.URL+"/api/webhook-endpoints/"+ep.ID, "", &got)
		if got.DisabledReason != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the failing endpoint was not disabled within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	b := browsertest.New(t, browsertest.Desktop)
	signInBrowser(t, b, in.URL, "ada@acme.example", nil)
	wantText(t, b, "flowd disabled the webhook endpoint “Loan system”", "See why on the Webhooks page")
	var visible bool
	b.Run(chromedp.Evaluate(`(function(){var e=document.getElementById("console-banner");
		return !!e && e.getBoundingClientRect().height > 0 && getComputedStyle(e).display !== "none"})()`, &visible))
	if !visible {
		t.Fatal("the banner is not visible")
	}
	b.Screenshot("endpoint-disabled-01-banner")
	clickTo(t, b, `#console-banner a`, "/console/webhooks")
	wantText(t, b, "Deliveries failed for", "HTTP 503 Service Unavailable")
	b.Screenshot("endpoint-disabled-02-webhooks")
	clickTo(t, b, `form[action="/console/webhooks/`+ep.ID+`/enable"] button`, "notice=endpoint_enabled")
	wantText(t, b, "was enabled; it receives events again")
	notText(t, b, "flowd disabled the webhook endpoint")
	navigate(t, b, in.URL+"/console/flows")
	notText(t, b, "flowd disabled the webhook endpoint")
	b.Screenshot("endpoint-disabled-03-enabled")

	var after struct {
		Enabled        bool    `json:"enabled"`
		DisabledReason *string `json:"disabledReason"`
		FailingSince   *string `json:"failingSince"`
	}
	call(t, e.acmeAPI, "GET", in.URL+"/api/webhook-endpoints/"+ep.ID, "", &after)
	if !after.Enabled || after.DisabledReason != nil || after.FailingSince != nil {
		raw, _ := json.Marshal(after)
		t.Fatalf("after Enable: %s", raw)
	}
}
