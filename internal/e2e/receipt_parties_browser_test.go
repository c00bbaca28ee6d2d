package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/keys"
)

// words is a page's text with its whitespace collapsed, so that a label and
// its value read as one phrase whatever the layout puts between them.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// wantPhrases fails the test unless text holds every phrase.
func wantPhrases(t *testing.T, where, text string, phrases ...string) {
	t.Helper()
	for _, p := range phrases {
		if !strings.Contains(words(text), p) {
			t.Errorf("%s lacks %q:\n%s", where, p, text)
		}
	}
}

// TestTheReceiptNamesWhoAskedAndWhoReceivesInABrowser: a consent whose
// definition names a credit bureau as the recipient is asked for by the
// organization, and every page of the person says both plainly: the
// request, the answer and its receipt, the withdrawal, the check of a
// receipt; the receipt names the organization by its registered name and
// the bureau in its own claim, and so does `flowd receipts verify`. A
// receipt signed before the recipient had a claim of its own still checks
// out, and is shown for what it says.
func TestTheReceiptNamesWhoAskedAndWhoReceivesInABrowser(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t, flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"))
	ctx := e.b.Ctx
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flow-definitions", `{"id":"credit-check",`+
		`"title":{"en":"Credit check","nb":"Kredittsjekk"},"purpose":{"en":"We ask the bureau about your loans.","nb":"Vi spør byrået om lånene dine."},`+
		`"recipient":"Kredittbyrået AS","assuranceLevel":"low"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("publishing the definition: %d", resp.StatusCode)
	}
	var c createdFlow
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flows", `{"nationalId":"`+rightID+`","lastName":"Nordmann",`+
		`"redirectUrl":"`+e.site.srv.URL+`/done","flowDefinitionId":"credit-check"}`, &c); resp.StatusCode != 201 {
		t.Fatalf("create: %d", resp.StatusCode)
	}

	run(t, ctx, chromedp.Navigate(c.Links.Consent.Href+"?lang=nb"))
	p := waitPage(t, ctx, "Samtykker du?")
	wantPhrases(t, "the request in Norwegian", p.text, "Hvem som ber om samtykket Acme Bank", "Hvem som mottar opplysningene Kredittbyrået AS")
	run(t, ctx, chromedp.Navigate(c.Links.Consent.Href+"?lang=en"))
	p = waitPage(t, ctx, "Do you consent?")
	wantPhrases(t, "the request", p.text, "Who asks for your consent Acme Bank", "Who receives the data Kredittbyrået AS")
	shot(t, ctx, "parties-1-request")
	run(t, ctx, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
	waitPage(t, ctx, "Back at Acme Bank")

	run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
	p = waitPage(t, ctx, "You accepted this request")
	wantPhrases(t, "the answered page", p.text, "Who asks for your consent Acme Bank", "Who receives the data Kredittbyrået AS",
		"Organization that asked Acme Bank", "Recipient of the data Kredittbyrået AS", "Acme Bank is told at once")
	receipt := download(t, ctx, `a.receipt-download`)
	claims, err := verifyWithJWKS(context.Background(), e.in.URL+"/oauth/jwks", receipt)
	if err != nil {
		t.Fatal(err)
	}
	if claims["organizationId"] != e.org.ID || claims["organizationName"] != "Acme Bank" || claims["recipient"] != "Kredittbyrået AS" {
		t.Fatalf("the receipt names %v (%v) and recipient %v, want Acme Bank (%s) and Kredittbyrået AS",
			claims["organizationName"], claims["organizationId"], claims["recipient"], e.org.ID)
	}

	run(t, ctx, chromedp.Click(`form.withdraw button`, chromedp.ByQuery))
	p = waitPage(t, ctx, "Your consent is withdrawn")
	wantPhrases(t, "the withdrawal", p.text, "Acme Bank has been told that you no longer consent to Kredittbyrået AS receiving your data.",
		"Organization that asked Acme Bank", "Recipient of the data Kredittbyrået AS")
	shot(t, ctx, "parties-2-withdrawn")

	wantPhrases(t, "the check of the receipt", checkOnVerifyPage(t, ctx, e.in.URL, receipt).text, "This receipt is genuine",
		"Organization that asked Acme Bank", "Recipient of the data Kredittbyrået AS")
	file := filepath.Join(t.TempDir(), "receipt.jwt")
	if err := os.WriteFile(file, []byte(receipt), 0o600); err != nil {
		t.Fatal(err)
	}
	wantPhrases(t, "flowd receipts verify", e.in.CLI(t, "", "receipts", "verify", file),
		"of Acme Bank ("+e.org.ID+")", "recipient Kredittbyrået AS")

	// A receipt as flowd signed them before: the recipient in
	// organizationName, no recipient claim.
	delete(claims, "recipient")
	claims["organizationName"], claims["jti"] = "Kredittbyrået AS", uuid.NewString()
	earlier := signReceipt(t, e.in, claims)
	p = checkOnVerifyPage(t, ctx, e.in.URL, earlier)
	wantPhrases(t, "the check of an earlier receipt", p.text, "This receipt is genuine", "Recipient of the data Kredittbyrået AS")
	if strings.Contains(p.text, "Organization that asked") {
		t.Errorf("an earlier receipt names no organization that asked, but the page shows one:\n%s", p.text)
	}
	if err := os.WriteFile(file, []byte(earlier), 0o600); err != nil {
		t.Fatal(err)
	}
	wantPhrases(t, "flowd receipts verify of an earlier receipt", e.in.CLI(t, "", "receipts", "verify", file),
		"of organization "+e.org.ID, "recipient Kredittbyrået AS")
}

// signReceipt signs claims with the instance's receipt key, as flowd signs
// receipts.
func signReceipt(t *testing.T, in *flowdtest.Instance, claims map[string]any) string {
	t.Helper()
	cfg, err := config.Load(in.Getenv, config.Need{Secrets: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pool, err := database.Open(ctx, in.DatabaseURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	raw, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signing, err := keys.New(pool, changes.NewFeed(pool, nil), keys.Config{KeyEncryptionKey: cfg.KeyEncryptionKey})
	if err != nil {
		t.Fatal(err)
	}
	var jws string
	if err := database.WithTx(ctx, pool, func(tx database.Tx) (err error) {
		jws, err = signing.SignReceiptTx(ctx, tx, receipts.Type, raw)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return jws
}
