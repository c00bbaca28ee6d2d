package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/web"
)

// mortgageDefinition is a consent definition with every field, whose text
// differs in each language, at the level required.
func mortgageDefinition(level string) string {
	return `{"id":"mortgage-data-sharing","versionTag":"DOC-7",` +
		`"title":{"en":"Share your income with Acme Bank","nb":"Del inntekten din med Acme Bank"},` +
		`"purpose":{"en":"We use it to assess your mortgage.\n\n- Salary\n- Tax","nb":"Vi bruker den til å vurdere boliglånet.\n\n- Lønn\n- Skatt"},` +
		`"dataCategories":[{"en":"Income","nb":"Inntekt"},{"en":"Tax returns","nb":"Skattemeldinger"}],` +
		`"recipient":"Acme Bank ASA","validity":"P90D","assuranceLevel":"` + level + `"}`
}

// flowOn creates a flow on a definition version ("" and 0: the defaults).
func (e *consentEnv) flowOn(t *testing.T, definition string, version int) createdFlow {
	t.Helper()
	var c createdFlow
	body, _ := json.Marshal(map[string]any{"nationalId": rightID, "lastName": "Nordmann",
		"redirectUrl": e.site.srv.URL + "/done", "webhookUrl": e.hooks.srv.URL + "/hooks",
		"flowDefinitionId": definition, "flowDefinitionVersion": version})
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flows", string(body), &c); resp.StatusCode != 201 {
		t.Fatalf("create on %s: %d", definition, resp.StatusCode)
	}
	return c
}

// decidedFlow is the part of a retrieve these tests look at.
type decidedFlow struct {
	Flow struct {
		FlowDefinitionID string  `json:"flowDefinitionId"`
		VersionTag       *string `json:"versionTag"`
		Meta             struct {
			ProcessDefinitionID string `json:"processDefinitionId"`
			ProcessVersion      string `json:"processVersion"`
		} `json:"_meta"`
		Consent struct {
			Status         string  `json:"status"`
			TextSHA256     *string `json:"textSha256"`
			Language       *string `json:"language"`
			AssuranceLevel *string `json:"assuranceLevel"`
			ValidUntil     *string `json:"validUntil"`
			DecidedAt      *string `json:"decidedAt"`
		} `json:"consent"`
	} `json:"flow"`
}

// signInAt signs in through the test eID as nationalID at level.
func signInAt(t *testing.T, e *consentEnv, nationalID, level string) {
	t.Helper()
	ctx := e.b.Ctx
	toEIDForm(t, ctx)
	run(t, ctx, chromedp.SetValue(`#national_id`, nationalID, chromedp.ByQuery),
		chromedp.Click(`input[name=level][value=`+level+`]`, chromedp.ByQuery),
		chromedp.Click(`form button[type=submit]`, chromedp.ByQuery))
}

func TestAConsentShowsItsDefinitionVersion(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t)
	ctx := e.b.Ctx
	var v1 web.FlowDefinition
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flow-definitions", mortgageDefinition("substantial"), &v1); resp.StatusCode != 201 {
		t.Fatalf("create definition: %d %+v", resp.StatusCode, v1)
	}
	// The text hash is the SHA-256 of the canonical text, which anyone can
	// rebuild from the definition the API shows.
	rebuilt := consent.Version{DefinitionID: v1.ID, Version: v1.Version, Title: v1.Title, Purpose: v1.Purpose,
		DataCategories: v1.DataCategories, Recipient: v1.Recipient, AssuranceLevel: assurance.Level(v1.AssuranceLevel)}
	rebuilt.Validity, _ = consent.ParseValidity(*v1.Validity)
	if sum := sha256.Sum256(rebuilt.CanonicalText()); hex.EncodeToString(sum[:]) != v1.TextSHA256 {
		t.Fatalf("textSha256 %s is not the canonical text's", v1.TextSHA256)
	}
	c := e.flowOn(t, "mortgage-data-sharing", 0)
	// A version published after the flow was made changes nothing it shows.
	var v2 web.FlowDefinition
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flow-definitions/mortgage-data-sharing/versions",
		`{"title":{"en":"Version two","nb":"Versjon to"},"purpose":{"en":"New","nb":"Ny"}}`, &v2); resp.StatusCode != 201 || v2.Version != 2 {
		t.Fatalf("publish: %d %+v", resp.StatusCode, v2)
	}

	for _, tt := range []struct {
		lang string
		want []string
	}{
		{"en", []string{"Share your income with Acme Bank", "We use it to assess your mortgage.", "Salary", "Tax returns",
			"Acme Bank ASA", "90 days", "substantial"}},
		{"nb", []string{"Del inntekten din med Acme Bank", "Vi bruker den til å vurdere boliglånet.", "Lønn", "Skattemeldinger",
			"Acme Bank ASA", "90 dager", "betydelig"}},
	} {
		e.fresh(t)
		run(t, ctx, chromedp.Navigate(c.Links.Consent.Href+"?lang="+tt.lang))
		p := waitPage(t, ctx, tt.want[0])
		for _, want := range tt.want {
			if !strings.Contains(p.text, want) {
				t.Errorf("the %s page lacks %q:\n%s", tt.lang, want, p.text)
			}
		}
		if strings.Contains(p.text, "Version two") || strings.Contains(p.text, "Versjon to") {
			t.Fatalf("the flow shows the version published after it:\n%s", p.text)
		}
		var items int
		run(t, ctx, chromedp.Evaluate(`document.querySelectorAll(".consent-purpose ul li").length`, &items))
		if items != 2 {
			t.Errorf("the purpose's list has %d items, want 2", items)
		}
		shot(t, ctx, "definition-"+tt.lang)
	}

	// Signed in in Norwegian, the person accepts; the decision records the
	// text's hash and the language it was shown in.
	signInAt(t, e, rightID, "substantial")
	waitPage(t, ctx, "Samtykker du?")
	run(t, ctx, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
	waitPage(t, ctx, "Back at Acme Bank")
	var f decidedFlow
	call(t, e.api, "GET", e.in.URL+"/api/flows/"+c.FlowID, "", &f)
	got := f.Flow
	if got.FlowDefinitionID != "mortgage-data-sharing" || got.Meta.ProcessDefinitionID != "mortgage-data-sharing:1" ||
		got.Meta.ProcessVersion != "1" || got.VersionTag == nil || *got.VersionTag != "DOC-7" {
		t.Fatalf("pinned %+v", got)
	}
	if got.Consent.Status != "Accepted" || got.Consent.TextSHA256 == nil || *got.Consent.TextSHA256 != v1.TextSHA256 ||
		*got.Consent.Language != "nb" || *got.Consent.AssuranceLevel != "substantial" || got.Consent.ValidUntil == nil {
		t.Fatalf("consent %+v", got.Consent)
	}
	ev := e.hooks.waitFor("flow.accepted")
	if data := ev["data"].(map[string]any); data["flowDefinitionId"] != "mortgage-data-sharing" {
		t.Fatalf("the webhook's data %v", data)
	}
}

func TestAHighDefinitionRefusesASubstantialSignIn(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t)
	ctx := e.b.Ctx
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flow-definitions", mortgageDefinition("high"), nil); resp.StatusCode != 201 {
		t.Fatalf("create definition: %d", resp.StatusCode)
	}
	c := e.flowOn(t, "mortgage-data-sharing", 0)
	e.fresh(t)
	run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
	waitPage(t, ctx, "Share your income with Acme Bank")
	signInAt(t, e, rightID, "substantial")
	p := waitPage(t, ctx, "A stronger electronic ID is needed")
	if strings.Contains(p.text, "Do you consent?") || !strings.Contains(p.text, "level high") {
		t.Fatalf("the page after a substantial sign-in:\n%s", p.text)
	}
	shot(t, ctx, "stronger-eid")
	if f := e.flow(t, c.FlowID); f.Flow.Consent.Status != "Opened" {
		t.Fatalf("after the refused sign-in the flow is %s", f.Flow.Consent.Status)
	}
	// The way on asks the eID for high: the test eID offers it preselected.
	toEIDForm(t, ctx)
	var preselected bool
	run(t, ctx, chromedp.Evaluate(`document.querySelector("input[name=level][value=high]").checked`, &preselected))
	if !preselected {
		t.Error("the test eID did not preselect the level the consent asked for")
	}
	run(t, ctx, chromedp.SetValue(`#national_id`, rightID, chromedp.ByQuery),
		chromedp.Click(`input[name=level][value=high]`, chromedp.ByQuery),
		chromedp.Click(`form button[type=submit]`, chromedp.ByQuery))
	waitPage(t, ctx, "Do you consent?")
	run(t, ctx, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
	waitPage(t, ctx, "Back at Acme Bank")
	var f decidedFlow
	call(t, e.api, "GET", e.in.URL+"/api/flows/"+c.FlowID, "", &f)
	if f.Flow.Consent.Status != "Accepted" || *f.Flow.Consent.AssuranceLevel != "high" || *f.Flow.Consent.Language != "en" {
		t.Fatalf("consent %+v", f.Flow.Consent)
	}
}
