package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/testkit/browsertest"
	"github.com/flowd/flowd/internal/testkit/testwait"

	// jwx is a JOSE library flowd does not sign with: a receipt must verify
	// against /oauth/jwks with any standard library.
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
)

// verifyWithJWKS checks receipt against flowd's published JWKS with jwx and
// returns its claims; a receipt that does not verify is an error.
func verifyWithJWKS(ctx context.Context, jwksURL, receipt string) (map[string]any, error) {
	set, err := jwk.Fetch(ctx, jwksURL)
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify([]byte(receipt), jws.WithKeySet(set, jws.WithRequireKid(true)))
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	return claims, json.Unmarshal(payload, &claims)
}

// download clicks the link sel and returns the file the browser saved.
func download(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	dir := t.TempDir()
	run(t, ctx, browsertest.AllowDownloads(dir), chromedp.Click(sel, chromedp.ByQuery))
	var receipt string
	testwait.For(t, "the browser to save the receipt in "+dir, func() (bool, string) {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && len(b) > 0 && strings.HasSuffix(f, ".jwt") {
				receipt = string(b)
				return true, ""
			}
		}
		return false, fmt.Sprintf("files %v", files)
	})
	return receipt
}

// tamper changes one character of the receipt's claims.
func tamper(receipt string) string {
	parts := strings.Split(receipt, ".")
	c := parts[1][10]
	repl := byte('A')
	if c == 'A' {
		repl = 'B'
	}
	parts[1] = parts[1][:10] + string(repl) + parts[1][11:]
	return strings.Join(parts, ".")
}

// checkOnVerifyPage pastes receipt on the public page and returns what it says.
func checkOnVerifyPage(t *testing.T, ctx context.Context, base, receipt string) page {
	t.Helper()
	browsertest.Navigate(t, ctx, base+"/receipts/verify")
	run(t, ctx, chromedp.SetValue(`#receipt`, receipt, chromedp.ByQuery), chromedp.Click(`form.verify button`, chromedp.ByQuery))
	return waitPage(t, ctx, "This receipt is")
}

func TestReceiptAndWithdrawalInABrowser(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t)
	ctx := e.b.Ctx
	jwks := e.in.URL + "/oauth/jwks"
	c := e.createFlow(t, true)

	// Accept: the redirect carries the link where the receipt waits.
	run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
	waitPage(t, ctx, "Continue with electronic ID")
	signIn(t, ctx, rightID, "")
	waitPage(t, ctx, "Do you consent?")
	run(t, ctx, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
	landed := waitPage(t, ctx, "Back at Acme Bank")
	u, _ := url.Parse(landed.url)
	if u.Query().Get("receiptUrl") != c.Links.Consent.Href {
		t.Fatalf("landed at %s, want receiptUrl %s", landed.url, c.Links.Consent.Href)
	}
	e.hooks.waitFor("flow.accepted")

	run(t, ctx, chromedp.Navigate(u.Query().Get("receiptUrl")))
	p := waitPage(t, ctx, "You accepted this request")
	for _, want := range []string{"Your receipts", "Consent given", c.ReferenceID, "Withdraw consent", "Download your receipt"} {
		if !strings.Contains(p.text, want) {
			t.Errorf("the answered page lacks %q:\n%s", want, p.text)
		}
	}
	if strings.Contains(p.text, rightID) {
		t.Fatal("the answered page shows the national id in full")
	}
	shot(t, ctx, "receipt-1-answered")

	first := download(t, ctx, `a.receipt-download`)
	claims, err := verifyWithJWKS(context.Background(), jwks, first)
	if err != nil {
		t.Fatalf("the downloaded receipt does not verify against %s: %v", jwks, err)
	}
	var flow struct {
		Flow struct {
			FlowDefinitionID string `json:"flowDefinitionId"`
			NumAttachments   int    `json:"numAttachments"`
			Consent          struct {
				Status      string  `json:"status"`
				TextSHA256  string  `json:"textSha256"`
				WithdrawnAt *string `json:"withdrawnAt"`
			} `json:"consent"`
		} `json:"flow"`
	}
	call(t, e.api, "GET", e.in.URL+"/api/flows/"+c.FlowID, "", &flow)
	def, _ := claims["definition"].(map[string]any)
	if claims["flowId"] != c.FlowID || claims["referenceId"] != c.ReferenceID || claims["decision"] != "accepted" ||
		claims["organizationName"] != "Acme Bank" || def["textSha256"] != flow.Flow.Consent.TextSHA256 ||
		def["id"] != flow.Flow.FlowDefinitionID || claims["subject"] == nil || flow.Flow.NumAttachments != 1 {
		t.Fatalf("the receipt's claims %v do not match the flow %+v", claims, flow.Flow)
	}
	if strings.Contains(first, rightID) {
		t.Fatal("the receipt holds the national id")
	}

	// The public page says the same, and refuses a changed receipt; so does jwx.
	if p := checkOnVerifyPage(t, ctx, e.in.URL, first); !strings.Contains(p.text, "This receipt is genuine") || !strings.Contains(p.text, c.ReferenceID) {
		t.Fatalf("the verify page on the genuine receipt:\n%s", p.text)
	}
	shot(t, ctx, "receipt-2-verified")
	if p := checkOnVerifyPage(t, ctx, e.in.URL, tamper(first)); !strings.Contains(p.text, "This receipt is not genuine") {
		t.Fatalf("the verify page on a changed receipt:\n%s", p.text)
	}
	shot(t, ctx, "receipt-3-tampered")
	if _, err := verifyWithJWKS(context.Background(), jwks, tamper(first)); err == nil {
		t.Fatal("jwx verifies a changed receipt")
	}

	// Withdraw: the second receipt points at the first.
	run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
	waitPage(t, ctx, "You accepted this request")
	run(t, ctx, chromedp.Click(`form.withdraw button`, chromedp.ByQuery))
	p = waitPage(t, ctx, "Your consent is withdrawn")
	if !strings.Contains(p.text, "Consent withdrawn") || !strings.Contains(p.text, claims["jti"].(string)) {
		t.Fatalf("the withdrawal page:\n%s", p.text)
	}
	shot(t, ctx, "receipt-4-withdrawn")
	second := download(t, ctx, `a.receipt-download`)
	withdrawal, err := verifyWithJWKS(context.Background(), jwks, second)
	if err != nil {
		t.Fatalf("the withdrawal's receipt: %v", err)
	}
	if withdrawal["decision"] != "withdrawn" || withdrawal["previous"] != claims["jti"] || withdrawal["withdrawnBy"] != "individual" {
		t.Fatalf("the withdrawal's receipt: %v", withdrawal)
	}

	ev := e.hooks.waitFor("flow.withdrawn")
	if data := ev["data"].(map[string]any); data["flowId"] != c.FlowID || data["status"] != "Withdrawn" {
		t.Fatalf("flow.withdrawn: %v", ev)
	}
	call(t, e.api, "GET", e.in.URL+"/api/flows/"+c.FlowID, "", &flow)
	if flow.Flow.Consent.Status != "Withdrawn" || flow.Flow.Consent.WithdrawnAt == nil || flow.Flow.NumAttachments != 2 {
		t.Fatalf("after the withdrawal the API shows %+v", flow.Flow)
	}

	// The link is spent now.
	run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
	if p := waitPage(t, ctx, "This request is closed"); !strings.Contains(p.text, "has been withdrawn") || strings.Contains(p.text, "Withdraw consent") {
		t.Fatalf("the link after the withdrawal:\n%s", p.text)
	}
}
