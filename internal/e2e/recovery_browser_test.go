package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/browsertest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// TestRecoveryAndRedeliveryInABrowser: a receiver that answered 410 Gone
// to every event is back; an admin recovers its endpoint's failed
// deliveries from the endpoint's page and watches the recovery reach done,
// then sends one flow's event again from the flow's page. Both are in the
// audit log.
func TestRecoveryAndRedeliveryInABrowser(t *testing.T) {
	t.Parallel()
	// One organization with an admin: less to make than startConsole's.
	e := &consoleEnv{in: flowdtest.Start(t)}
	e.acme, e.acmeAPI = createOrgAndClient(t, e.in, "Acme Bank", "ACME")
	e.staff(t, e.acme.ID, "ada@acme.example", "Ada Admin", "admin")
	base := e.in.URL
	rcv := newFlakyReceiver(t, http.StatusGone)
	var endpoint struct{ ID string }
	if resp := call(t, e.acmeAPI, "POST", base+"/api/webhook-endpoints", `{"url":"`+rcv.srv.URL+`/hooks"}`, &endpoint); resp.StatusCode != 201 {
		t.Fatalf("create endpoint: %d", resp.StatusCode)
	}
	const n = 3
	var flows []newFlow
	for i := range n {
		flows = append(flows, e.createFlow(t, e.acmeAPI, fmt.Sprintf("GONE%d", i), ""))
	}
	// Every flow.created event's delivery to the endpoint fails for good.
	failed := func() int {
		var page struct {
			Data []struct{ ID string } `json:"data"`
		}
		call(t, e.acmeAPI, "GET", base+"/api/events", "", &page)
		done := 0
		for _, ev := range page.Data {
			var detail struct {
				Deliveries []struct{ State string } `json:"deliveries"`
			}
			call(t, e.acmeAPI, "GET", base+"/api/events/"+ev.ID, "", &detail)
			if len(detail.Deliveries) == 1 && detail.Deliveries[0].State == "failed" {
				done++
			}
		}
		return done
	}
	testwait.For(t, "every delivery to fail", func() (bool, string) {
		f := failed()
		return f >= n, fmt.Sprintf("%d of %d failed", f, n)
	})
	rcv.status.Store(http.StatusNoContent)
	before := rcv.hits.Load()

	b := browsertest.New(t, browsertest.Desktop)
	signInBrowser(t, b, base, "ada@acme.example", nil)
	clickTo(t, b, `nav a[href="/console/webhooks"]`, "/console/webhooks")
	// The deliveries page lists the failed ones, each with a retry.
	clickTo(t, b, `a[href="/console/webhooks/deliveries"]`, "/console/webhooks/deliveries")
	wantText(t, b, "Webhook deliveries", "Gave up", "flow.created", "Retry now")
	clickTo(t, b, `nav a[href="/console/webhooks"]`, "/console/webhooks")
	page := "/console/webhooks/" + endpoint.ID
	clickTo(t, b, `a[href="`+page+`"]`, page)
	wantText(t, b, "Recover failed deliveries", "No recoveries yet.")
	b.Screenshot("desktop-01-endpoint")
	clickTo(t, b, `form[action="`+page+`/recover"] button[type=submit]`, "notice=recovery_started")
	wantText(t, b, "are being sent again", "staff:ada@acme.example")
	// The page reloads itself until the recovery is done.
	b.Await("the recovery done", browsertest.Selector(`#recoveries .badge.ok`))
	wantText(t, b, "done", fmt.Sprintf("%d of %d", n, n))
	b.Screenshot("desktop-02-recovered")
	testwait.For(t, "the recovered deliveries", func() (bool, string) {
		got := rcv.hits.Load() - before
		return got >= int32(n), fmt.Sprintf("%d of %d arrived", got, n)
	})

	// One flow's event again, from the flow's page.
	navigate(t, b, base+"/console/flows/"+flows[0].FlowID)
	wantText(t, b, "Events", "flow.created")
	b.Screenshot("desktop-03-flow-events")
	clickTo(t, b, `#events form[action$="/redeliver"] button`, "notice=redelivered")
	wantText(t, b, "Event flow.created #1 is being sent again")
	testwait.For(t, "the redelivered event", func() (bool, string) {
		got := rcv.hits.Load() - before
		return got >= int32(n+1), fmt.Sprintf("%d deliveries since the recovery began, want %d", got, n+1)
	})
	clickTo(t, b, `nav a[href="/console/audit"]`, "/console/audit")
	wantText(t, b, "webhook_endpoint.recover", "event.redeliver")
}
