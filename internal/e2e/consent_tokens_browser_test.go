package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsentTokensOnMy: the person sees on /my which data holder was
// shown their consent, by the resource's name, and when; withdrawing there
// turns the data holder's introspection inactive at once.
func TestConsentTokensOnMy(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t)
	ctx := e.b.Ctx
	ct := newConsentTokenEnv(t, e.in)
	ct.redirectURL = e.site.srv.URL + "/done"
	f := ct.flow(t)
	acceptIn(t, e, f.Links.Consent.Href, rightID, "substantial")
	tok := ct.consentToken(t, f.FlowID)

	run(t, ctx, chromedp.Navigate(e.in.URL+"/my?lang=en"))
	p := waitPage(t, ctx, "Every consent request addressed to you")
	want := "Shown to a data holder, for " + incomeName + " (" + incomeURI + ")"
	if !strings.Contains(p.text, want) {
		t.Errorf("/my lacks %q:\n%s", want, p.text)
	}
	if got := ct.introspect(t, ct.tax, tok); got["active"] != true {
		t.Fatalf("before the withdrawal: %v", got)
	}
	run(t, ctx, chromedp.Click(`#consent-`+f.FlowID+` a.my-withdraw`, chromedp.ByQuery))
	waitPage(t, ctx, "Withdraw your consent?")
	run(t, ctx, chromedp.Click(`form.withdraw button[type=submit]`, chromedp.ByQuery))
	waitPage(t, ctx, "Your consent is withdrawn")
	if got := ct.introspect(t, ct.tax, tok); got["active"] != false {
		t.Errorf("after the withdrawal on /my: %v", got)
	}
}
