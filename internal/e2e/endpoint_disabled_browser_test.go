package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/browsertest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// TestDisabledEndpointBannerInABrowser: with a disable window of a second,
// an endpoint registered over the API that keeps failing is disabled by
// flowd; flows created meanwhile send it nothing. The console's pages show
// a banner naming it that leads to the Webhooks page, where the reason
// shows; Enable asks to confirm, offering to recover what the endpoint
// missed, ticked and prefilled. Enabling so ends the banner and sends the
// receiver, back again, every event it missed once, by webhook-id.
func TestDisabledEndpointBannerInABrowser(t *testing.T) {
	t.Parallel()
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

	testwait.For(t, "the failing endpoint to be disabled", func() (bool, string) {
		var got struct {
			DisabledReason *string `json:"disabledReason"`
			DisabledAt     *string `json:"disabledAt"`
		}
		call(t, e.acmeAPI, "GET", in.URL+"/api/webhook-endpoints/"+ep.ID, "", &got)
		return got.DisabledReason != nil && got.DisabledAt != nil, fmt.Sprintf("disabledReason %v, disabledAt %v", got.DisabledReason, got.DisabledAt)
	})
	// Flows created while it is disabled send it nothing.
	const missed = 4
	for i := range missed {
		e.createFlow(t, e.acmeAPI, fmt.Sprintf("2345678901%d", i), "")
	}
	rcv.status.Store(http.StatusNoContent)

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
	clickTo(t, b, `form[action="/console/webhooks/`+ep.ID+`/enable"] button`, "/console/webhooks/"+ep.ID+"/enable")
	wantText(t, b, "Enable this webhook endpoint?", "Also send it every event of its types it missed", "before its deliveries began to fail")
	var ticked bool
	var since string
	b.Run(chromedp.Evaluate(`document.getElementById("recover").checked`, &ticked), chromedp.Value(`#since`, &since, chromedp.ByQuery))
	if !ticked || since == "" {
		t.Fatalf("the recovery is not offered ticked and prefilled: ticked %v, since %q", ticked, since)
	}
	b.Screenshot("endpoint-disabled-03-enable")
	clickTo(t, b, `form[action="/console/webhooks/`+ep.ID+`/enable"] button[type=submit]`, "notice=endpoint_enabled_recovering")
	wantText(t, b, "was enabled; the events it missed are being sent")
	notText(t, b, "flowd disabled the webhook endpoint")
	// The page reloads itself until the recovery is done.
	b.Await("the recovery done", browsertest.Selector(`#recoveries .badge.ok`))
	b.Screenshot("endpoint-disabled-04-recovered")
	navigate(t, b, in.URL+"/console/flows")
	notText(t, b, "flowd disabled the webhook endpoint")

	var after struct {
		Enabled        bool    `json:"enabled"`
		DisabledReason *string `json:"disabledReason"`
		FailingSince   *string `json:"failingSince"`
		DisabledAt     *string `json:"disabledAt"`
	}
	call(t, e.acmeAPI, "GET", in.URL+"/api/webhook-endpoints/"+ep.ID, "", &after)
	if !after.Enabled || after.DisabledReason != nil || after.FailingSince != nil || after.DisabledAt != nil {
		raw, _ := json.Marshal(after)
		t.Fatalf("after Enable: %s", raw)
	}
	// Every event it missed arrives once: the failed flow.created, those of
	// the flows made while it was disabled, and its own endpoint.disabled.
	var events struct {
		Data []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"data"`
	}
	call(t, e.acmeAPI, "GET", in.URL+"/api/events?limit=100", "", &events)
	if len(events.Data) != missed+2 {
		t.Fatalf("%d events, want %d", len(events.Data), missed+2)
	}
	testwait.For(t, "every missed event to arrive", func() (bool, string) {
		n := len(rcv.ackedIDs())
		return n >= len(events.Data), fmt.Sprintf("%d of %d arrived", n, len(events.Data))
	})
	got := rcv.ackedIDs()
	for _, ev := range events.Data {
		if got[ev.ID] != 1 {
			t.Errorf("%s %s arrived %d times, want once", ev.Type, ev.ID, got[ev.ID])
		}
	}
}
