package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/testkit/browsertest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// TestConsoleInABrowser walks the console in headless Chromium the way staff
// do: sign in through the built-in provider, find a flow created over the
// API, retry its incident, delete a flow, make and revoke an API client,
// then try the same as a viewer and as staff of another organization. It
// saves a screenshot of every page, at desktop and at phone width.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	e := startConsole(t)
	base := e.in.URL
	rcv := newFlakyReceiver(t, 500)
	hooked := e.createFlow(t, e.acmeAPI, "12345678901", rcv.srv.URL+"/hooks")
	doomed := e.createFlow(t, e.acmeAPI, "DOOMED42", "")
	otherFlow := e.createFlow(t, e.otherAPI, "OTHER77", "")

	b := browsertest.New(t, browsertest.Desktop)
	shot := func(name string) { b.Screenshot("desktop-" + name) }
	// A newcomer starts at the front page, which leads to the console's sign-in.
	navigate(t, b, base+"/")
	wantText(t, b, "API reference", "Console", "Check a consent receipt")
	clickTo(t, b, `a[href="/console"]`, "/idp/login")
	signInBrowser(t, b, base, "ada@acme.example", shot)
	wantText(t, b, hooked.ReferenceID, doomed.ReferenceID, "•••••••••01")
	notText(t, b, otherFlow.ReferenceID, "12345678901")
	// The stylesheet applies (a broken rule earlier in app.css would swallow the console's).
	var styled bool
	b.Run(chromedp.Evaluate(`getComputedStyle(document.querySelector(".console-header")).display === "flex" &&
		getComputedStyle(document.querySelector(".console-nav")).display === "flex"`, &styled))
	if !styled {
		t.Fatal("the console's styles do not apply")
	}
	shot("02-flows")

	// Open the flow and retry the incident its failing receiver produced.
	e.waitForFlow(t, e.acmeAPI, hooked.FlowID, "an incident", func(f consoleAPIFlow) bool { return f.Flow.HasIncidents })
	clickTo(t, b, `a[href="/console/flows/`+hooked.FlowID+`"]`, "/console/flows/"+hooked.FlowID)
	wantText(t, b, "Open incidents", "500", "Consent timeline", "send-initiate-webhook", "delivers flow.created")
	shot("03-flow-incident")
	rcv.status.Store(204)
	hits := rcv.hits.Load()
	clickTo(t, b, `form[action$="/retry"] button`, "notice=retried")
	testwait.For(t, "the receiver to be called again after the retry", func() (bool, string) {
		return rcv.hits.Load() > hits, fmt.Sprintf("%d calls, as many as before the retry", rcv.hits.Load())
	})
	e.waitForFlow(t, e.acmeAPI, hooked.FlowID, "the incident resolved", func(f consoleAPIFlow) bool { return !f.Flow.HasIncidents })
	b.Run(chromedp.Reload())
	wantText(t, b, "retried now", "204")
	notText(t, b, "Open incidents")
	shot("04-flow-retried")
	clickTo(t, b, `form[action$="/reveal"] button`, "/reveal")
	wantText(t, b, "12345678901", "recorded in the audit log")
	shot("05-flow-revealed")

	// Delete a flow: confirmation, the list's notice, the deletions log, and the API's 404.
	navigate(t, b, base+"/console/flows/"+doomed.FlowID)
	clickTo(t, b, `a[href$="/delete"]`, "/delete")
	wantText(t, b, "Delete flow "+doomed.ReferenceID+"?")
	shot("06-delete-confirm")
	clickTo(t, b, `form.actions button[type=submit]`, "notice=deleted")
	wantText(t, b, "Flow "+doomed.ReferenceID+" was deleted")
	shot("07-flows-after-delete")
	clickTo(t, b, `nav a[href="/console/deletions"]`, "/console/deletions")
	wantText(t, b, doomed.ReferenceID, doomed.FlowID, "staff:ada@acme.example")
	shot("08-deletions")
	if resp := call(t, e.acmeAPI, "GET", base+"/api/flows/"+doomed.FlowID, "", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the deleted flow still answers over the API: %d", resp.StatusCode)
	}

	// Create an API client, use its secret at the token endpoint, revoke it.
	clickTo(t, b, `nav a[href="/console/credentials"]`, "/console/credentials")
	shot("09-credentials")
	clickTo(t, b, `a[href="/console/credentials/clients/new"]`, "/clients/new")
	b.Run(chromedp.SetValue("#name", "Loan backend", chromedp.ByQuery),
		chromedp.Click(`input[name=sandbox]`, chromedp.ByQuery))
	shot("10-new-client")
	clickTo(t, b, `form[action="/console/credentials/clients"] button[type=submit]`, "/console/credentials/clients")
	var clientID, secret string
	b.Run(chromedp.Text(`dl.kv dd code`, &clientID, chromedp.ByQuery), chromedp.Text(`#secret-value`, &secret, chromedp.ByQuery))
	wantText(t, b, "API client created", "only time it is shown", "Copy")
	shot("11-client-secret")
	token, status := tokenStatus(t, base, clientID, secret)
	if status != http.StatusOK || apiStatus(t, base, token) != http.StatusOK {
		t.Fatalf("the new client's secret at /oauth/token: %d", status)
	}
	navigate(t, b, base+"/console/credentials/clients/"+clientID+"/revoke")
	shot("12-revoke-confirm")
	clickTo(t, b, `form.actions button[type=submit]`, "notice=revoked")
	wantText(t, b, "Loan backend was revoked", "revoked")
	if s := apiStatus(t, base, token); s != http.StatusUnauthorized {
		t.Fatalf("the revoked client's token is still accepted: %d", s)
	}
	clickTo(t, b, `form[action$="/webhook-secret/reveal"] button`, "/webhook-secret/reveal")
	wantText(t, b, e.acme.WebhookSecret)
	shot("13-webhook-secret")
	navigate(t, b, base+"/console/credentials/webhook-secret/rotate")
	wantText(t, b, "24 hours")
	shot("14-webhook-rotate-confirm")

	// Settings, with a refused origin, and the audit log.
	clickTo(t, b, `nav a[href="/console/settings"]`, "/console/settings")
	shot("15-settings")
	b.Run(chromedp.SetValue("#redirect_origins", "https://bank.example\nnot a url", chromedp.ByQuery))
	clickTo(t, b, `form[action="/console/settings"] button[type=submit]`, "/console/settings")
	wantText(t, b, `"not a url"`)
	shot("16-settings-error")
	clickTo(t, b, `nav a[href="/console/audit"]`, "/console/audit")
	wantText(t, b, "flow.delete", "task.retry", "client.create", "client.revoke", "flow.reveal_national_id")
	notText(t, b, "12345678901", secret)
	shot("17-audit")

	// A viewer sees, but cannot act, even by posting the form directly.
	clickTo(t, b, `.console-user button`, "/console/signed-out")
	signInBrowser(t, b, base, "vic@acme.example", nil)
	navigate(t, b, base+"/console/flows/"+hooked.FlowID)
	wantText(t, b, hooked.ReferenceID)
	notText(t, b, "Delete flow", "Reveal", "Cancel flow")
	shot("18-viewer-flow")
	navigate(t, b, base+"/console/flows/"+hooked.FlowID+"/delete")
	wantText(t, b, "403", "Only an admin")
	b.Run(chromedp.Navigate(base + "/console/flows/" + hooked.FlowID))
	postDirectly(t, b, "/console/flows/"+hooked.FlowID+"/delete")
	wantText(t, b, "403", "Only an admin")
	shot("19-viewer-refused")
	e.waitForFlow(t, e.acmeAPI, hooked.FlowID, "still there", func(consoleAPIFlow) bool { return true })

	// Staff of another organization see none of it.
	navigate(t, b, base+"/console/flows")
	clickTo(t, b, `.console-user button`, "/console/signed-out")
	signInBrowser(t, b, base, "oscar@other.example", nil)
	wantText(t, b, otherFlow.ReferenceID)
	notText(t, b, hooked.ReferenceID)
	navigate(t, b, base+"/console/flows/"+hooked.FlowID)
	wantText(t, b, "404")
	notText(t, b, hooked.ReferenceID)
	shot("20-other-organization-404")

	// Every page at phone width.
	phone := browsertest.New(t, browsertest.Phone)
	pshot := func(name string) { phone.Screenshot("phone-" + name) }
	signInBrowser(t, phone, base, "ada@acme.example", pshot)
	for _, p := range []struct{ name, path string }{
		{"02-flows", "/console/flows"},
		{"03-flow", "/console/flows/" + hooked.FlowID},
		{"06-cancel-confirm", "/console/flows/" + hooked.FlowID + "/cancel"},
		{"07-flows-empty-archived", "/console/flows?archived=true"},
		{"08-deletions", "/console/deletions"},
		{"09-credentials", "/console/credentials"},
		{"10-new-client", "/console/credentials/clients/new"},
		{"15-settings", "/console/settings"},
		{"17-audit", "/console/audit"},
	} {
		navigate(t, phone, base+p.path)
		pshot(p.name)
	}
	navigate(t, phone, base+"/console/credentials")
	clickTo(t, phone, `form[action="/console/credentials/webhook-secret/reveal"] button`, "/reveal")
	pshot("13-webhook-secret")
}

// signInBrowser signs in through the built-in provider's staff form and
// lands on the flows list.
func signInBrowser(t *testing.T, b *browsertest.Browser, base, username string, shot func(string)) {
	t.Helper()
	navigate(t, b, base+"/console")
	b.Await("the sign-in form", browsertest.Selector("#password"))
	b.Run(chromedp.SetValue("#username", username, chromedp.ByQuery),
		chromedp.SetValue("#password", staffPassword, chromedp.ByQuery))
	if shot != nil {
		shot("01-sign-in")
	}
	clickTo(t, b, `button[type=submit]`, "/console/flows")
}

// navigate opens a URL and waits for its page.
func navigate(t *testing.T, b *browsertest.Browser, u string) {
	t.Helper()
	b.Navigate(u)
}

// clickTo clicks sel and waits until a new page has loaded at an address
// that contains want.
func clickTo(t *testing.T, b *browsertest.Browser, sel, want string) {
	t.Helper()
	b.ClickTo(sel, want)
}

// postDirectly submits a form to action with the page's CSRF token, the
// way a crafted request from a signed-in browser would.
func postDirectly(t *testing.T, b *browsertest.Browser, action string) {
	t.Helper()
	b.Run(chromedp.Evaluate(`window.flowdStale = true; (function(){var f=document.createElement('form');f.method='post';f.action='`+action+`';
		var c=document.createElement('input');c.type='hidden';c.name='csrf';c.value=document.querySelector('input[name=csrf]').value;
		f.appendChild(c);document.body.appendChild(f);f.submit();})()`, nil))
	b.Await("the answer to the form posted to "+action,
		"window.flowdStale !== true && location.href.includes("+browsertest.JS(action)+")")
}

func wantText(t *testing.T, b *browsertest.Browser, want ...string) {
	t.Helper()
	text := b.Text()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("page %s lacks %q:\n%s", b.Location(), w, text)
		}
	}
}

func notText(t *testing.T, b *browsertest.Browser, unwanted ...string) {
	t.Helper()
	text := b.Text()
	for _, w := range unwanted {
		if w != "" && strings.Contains(text, w) {
			t.Fatalf("page %s shows %q:\n%s", b.Location(), w, text)
		}
	}
}
