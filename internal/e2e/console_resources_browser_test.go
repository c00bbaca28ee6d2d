package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/testkit/browsertest"
)

// TestRegisteringAResourceInTheConsole: an admin reaches the Resources page
// from the console's navigation, a URI that is not absolute is named on
// the form and nothing is registered, and a good one is registered and
// listed. A viewer sees the list but not the form.
func TestRegisteringAResourceInTheConsole(t *testing.T) {
	t.Parallel()
	e := startConsole(t)
	base := e.in.URL

	b := browsertest.New(t, browsertest.Desktop)
	signInBrowser(t, b, base, "ada@acme.example", nil)
	clickTo(t, b, `nav a[href="/console/resources"]`, "/console/resources")
	wantText(t, b, "Register a resource", "No resources are registered")
	b.CheckAccessibility("the resources page")
	b.Screenshot("resources-1-empty")

	b.Run(chromedp.SetValue("#uri", "/income", chromedp.ByQuery), chromedp.SetValue("#name", "Income records", chromedp.ByQuery))
	clickTo(t, b, `form[action="/console/resources"] button`, "/console/resources")
	wantText(t, b, "The uri must be an absolute URI", "No resources are registered")
	b.Screenshot("resources-2-bad-uri")

	b.Run(chromedp.SetValue("#uri", "https://api.tax.example/income", chromedp.ByQuery))
	clickTo(t, b, `form[action="/console/resources"] button`, "notice=resource_created")
	wantText(t, b, "Resource https://api.tax.example/income was registered.", "Income records", "staff:ada@acme.example")
	b.Screenshot("resources-3-listed")

	v := browsertest.New(t, browsertest.Desktop)
	signInBrowser(t, v, base, "vic@acme.example", nil)
	navigate(t, v, base+"/console/resources")
	wantText(t, v, "https://api.tax.example/income")
	notText(t, v, "Register a resource")
}
