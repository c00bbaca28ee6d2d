package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/testkit/browsertest"
)

// TestConsoleDefinitionsInABrowser: an admin writes a definition, previews
// the consent page in both languages, publishes it, and sees it listed.
func TestConsoleDefinitionsInABrowser(t *testing.T) {
	t.Parallel()
	e := startConsole(t)
	b := browsertest.New(t, browsertest.Desktop)
	signInBrowser(t, b, e.in.URL, "ada@acme.example", nil)
	clickTo(t, b, `a[href="/console/definitions"]`, "/console/definitions")
	wantText(t, b, "Consent definitions", "consent", "default")
	clickTo(t, b, `a[href="/console/definitions/new"]`, "/console/definitions/new")
	b.Run(chromedp.SetValue("#id", "car-loan", chromedp.ByQuery),
		chromedp.SetValue("#title_en", "Check your car loan", chromedp.ByQuery),
		chromedp.SetValue("#title_nb", "Sjekk billånet ditt", chromedp.ByQuery),
		chromedp.SetValue("#purpose_en", "We look at it.\n\n- Payments", chromedp.ByQuery),
		chromedp.SetValue("#purpose_nb", "Vi ser på det.\n\n- Betalinger", chromedp.ByQuery),
		chromedp.SetValue("#categories", "Payments | Betalinger", chromedp.ByQuery),
		chromedp.SetValue("#validity", "P1Y", chromedp.ByQuery))
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

	// The publish form starts from the latest version; its preview shows
	// what is typed, in Norwegian beside English.
	clickTo(t, b, `a[href="/console/definitions/car-loan/publish"]`, "/console/definitions/car-loan/publish")
	b.Run(chromedp.Evaluate(`document.querySelector("#title_nb").value = ""`, nil), chromedp.SetValue("#title_nb", "Sjekk billånet og bilen", chromedp.ByQuery))
	clickTo(t, b, `button[value=preview]`, "/console/definitions/car-loan/publish")
	var en, nb string
	b.Run(chromedp.Text(`.consent-preview[lang=en] h1`, &en, chromedp.ByQuery),
		chromedp.Text(`.consent-preview[lang=nb] h1`, &nb, chromedp.ByQuery))
	if en != "Check your car loan" || nb != "Sjekk billånet og bilen" {
		t.Fatalf("previews: English %q, Norwegian %q", en, nb)
	}
	b.Screenshot("definition-publish-preview")
	clickTo(t, b, `button[value=publish]`, "/console/definitions/car-loan?version=2")
	var changed []string
	b.Run(chromedp.Evaluate(`[...document.querySelectorAll(".compare tr.changed th")].map(th => th.textContent.trim())`, &changed))
	if len(changed) != 1 || !strings.HasPrefix(changed[0], "Title, Norwegian") {
		t.Fatalf("changed fields %q, want the Norwegian title", changed)
	}
	var items []string
	b.Run(chromedp.Evaluate(`[...document.querySelectorAll(".compare td.text-blocks li")].map(li => li.textContent)`, &items))
	if strings.Join(items, ",") != "Payments,Payments,Betalinger,Betalinger,Payments | Betalinger,Payments | Betalinger" {
		t.Fatalf("the purposes and data categories are not lists: %q", items)
	}
	b.Screenshot("definition-version-2")
}
