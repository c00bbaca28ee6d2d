package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/browsertest"
)

// TestConsoleDefinitionsInABrowser: an admin writes a definition, previews
// the consent page in both languages, publishes it, and sees it listed.
func TestConsoleDefinitionsInABrowser(t *testing.T) {
	e := startConsole(t)
	b := browsertest.New(t, browsertest.Desktop)
	signInBrowser(t, b, e.in.URL, "ada@acme.example", nil)
	clickTo(t, b, `a[href="/console/definitions"]`, "/console/definitions")
	wantText(t, b, "Consent definitions", "consent", "default")
	clickTo(t, b, `a[href="/console/definitions/new"]`, "/console/definitions/new")
	b.Run(chromedp.SendKeys("#id", "car-loan", chromedp.ByQuery),
		chromedp.SendKeys("#title_en", "Check your car loan", chromedp.ByQuery),
		chromedp.SendKeys("#title_nb", "Sjekk billånet ditt", chromedp.ByQuery),
		chromedp.SendKeys("#purpose_en", "We look at it.\n\n- Payments", chromedp.ByQuery),
		chromedp.SendKeys("#purpose_nb", "Vi ser på det.\n\n- Betalinger", chromedp.ByQuery),
		chromedp.SendKeys("#categories", "Payments | Betalinger", chromedp.ByQuery),
		chromedp.SendKeys("#validity", "P1Y", chromedp.ByQuery))
	clickTo(t, b, `button[value=preview]`, "/console/definitions")
	wantText(t, b, "Preview of the consent page", "Check your car loan", "Sjekk billånet ditt", "1 year", "1 år", "Betalinger")
	var previews int
	b.Run(chromedp.Evaluate(`document.querySelectorAll(".consent-preview h1").length`, &previews))
	if previews != 2 {
		t.Fatalf("%d previews, want English and Norwegian", previews)
	}
	b.Screenshot("definition-preview")
	clickTo(t, b, `button[value=publish]`, "/console/definitions/car-loan?version=1")
	wantText(t, b, "car-loan version 1", "Check your car loan", "Payments | Betalinger")
	b.Screenshot("definition-version")
}
