package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/testkit/browsertest"
)

// TestErasingAPersonInTheConsole: an admin erases a person from the
// console's Erasures page, through its confirmation step; their flows are
// gone from the API, the other organization's flow of the same person
// stays, and the erasure receipt the page offers verifies with jwx. A
// viewer sees the erasures but not the form.
func TestErasingAPersonInTheConsole(t *testing.T) {
	t.Parallel()
	e := startConsole(t)
	base := e.in.URL
	const person = "ERASE-ME-7"
	first := e.createFlow(t, e.acmeAPI, person, "")
	second := e.createFlow(t, e.acmeAPI, person, "")
	otherFlow := e.createFlow(t, e.otherAPI, person, "")

	b := browsertest.New(t, browsertest.Desktop)
	signInBrowser(t, b, base, "ada@acme.example", nil)
	clickTo(t, b, `nav a[href="/console/erasures"]`, "/console/erasures")
	wantText(t, b, "Erase a person", "No one has been erased")
	b.CheckAccessibility("the erasures page")
	b.Screenshot("erasure-1-form")

	// A bad national id is named on the form; nothing is erased.
	b.Run(chromedp.SetValue("#nationalId", "not valid!", chromedp.ByQuery))
	clickTo(t, b, `form[action="/console/erasures/confirm"] button`, "/console/erasures/confirm")
	wantText(t, b, "The national id must be")
	b.Run(chromedp.SetValue("#nationalId", person, chromedp.ByQuery))
	clickTo(t, b, `form[action="/console/erasures/confirm"] button`, "/console/erasures/confirm")
	wantText(t, b, "Erase this person?", "Their consent receipts are kept as evidence")
	notText(t, b, person)
	b.CheckAccessibility("the erasure's confirmation")
	b.Screenshot("erasure-2-confirm")
	if resp := call(t, e.acmeAPI, "GET", base+"/api/flows/"+first.FlowID, "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the confirmation step erased already: %d", resp.StatusCode)
	}

	clickTo(t, b, `form.actions button[type=submit]`, "notice=erased")
	wantText(t, b, "The person was erased: 2 flows", "staff:ada@acme.example", "Erasure receipt")
	b.Screenshot("erasure-3-done")
	for _, f := range []newFlow{first, second} {
		if resp := call(t, e.acmeAPI, "GET", base+"/api/flows/"+f.FlowID, "", nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("erased flow %s: %d", f.ReferenceID, resp.StatusCode)
		}
	}
	if resp := call(t, e.otherAPI, "GET", base+"/api/flows/"+otherFlow.FlowID, "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("the other organization's flow: %d", resp.StatusCode)
	}
	receipt := download(t, b.Ctx, `a.erasure-receipt`)
	claims, err := verifyWithJWKS(context.Background(), base+"/oauth/jwks", receipt)
	if err != nil || claims["flowCount"] != float64(2) || claims["organizationName"] != "Acme Bank" || strings.Contains(receipt, person) {
		t.Fatalf("the downloaded erasure receipt: %v %v", claims, err)
	}

	// A viewer sees the erasure, not the form.
	v := browsertest.New(t, browsertest.Desktop)
	signInBrowser(t, v, base, "vic@acme.example", nil)
	navigate(t, v, base+"/console/erasures")
	wantText(t, v, "Past erasures", "staff:ada@acme.example")
	notText(t, v, "Erase a person")
}
