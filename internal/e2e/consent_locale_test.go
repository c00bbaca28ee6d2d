package e2e

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
)

// TestConsentSignInSpeaksThePageLanguage follows the consent journey over
// HTTP through the real binary in each language: the "Continue with
// electronic ID" link sends the browser to the provider with ui_locales
// naming the language the consent page was shown in, the test eID speaks
// it, and after sign-in the decision page does too.
func TestConsentSignInSpeaksThePageLanguage(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	_, api := createOrgAndClient(t, in, "Acme Bank", "ACME")
	tests := []struct {
		name           string
		acceptLanguage string
		switchTo       string // the consent page's language switch, clicked first
		lang           string // of every page
		uiLocales      string
		eidLabel       string
		decide         string
	}{
		{"English browser", "en-GB,en;q=0.9", "", "en", "en", "National identity number", "Do you consent?"},
		{"Norwegian browser", "nb-NO,nb;q=0.9,en;q=0.5", "", "nb", "nb en", "Fødselsnummer", "Samtykker du?"},
		{"switched to Norwegian", "en-US,en;q=0.9", "nb", "nb", "nb en", "Fødselsnummer", "Samtykker du?"},
		{"switched to English", "nb-NO", "en", "en", "en", "National identity number", "Do you consent?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c createdFlow
			if resp := call(t, api, "POST", in.URL+"/api/flows", `{"nationalId":"`+rightID+`","lastName":"Nordmann",`+
				`"redirectUrl":"https://bank.example/done"}`, &c); resp.StatusCode != 201 {
				t.Fatalf("create: %d", resp.StatusCode)
			}
			b := formbrowser.New(t)
			b.AcceptLanguage = tt.acceptLanguage
			// A browser's POST of flowd's own form carries fetch metadata.
			b.FormHeader = http.Header{"Sec-Fetch-Site": {"same-origin"}}
			link := c.Links.Consent.Href
			if tt.switchTo != "" {
				link += "?lang=" + tt.switchTo
			}
			start := b.Get(link)
			m := regexp.MustCompile(`<a class="button block" href="([^"]+/login)"`).FindStringSubmatch(start.Body)
			if start.Status != http.StatusOK || !strings.Contains(start.Body, `<html lang="`+tt.lang+`"`) || m == nil {
				t.Fatalf("consent page in %s with a sign-in link: %d %s", tt.lang, start.Status, start.Body)
			}

			toIDP := b.Get(in.URL + html.UnescapeString(m[1]))
			loc, err := url.Parse(toIDP.Location)
			if toIDP.Status != http.StatusSeeOther || err != nil || loc.Path != "/oauth/authorize" {
				t.Fatalf("the sign-in link: %d %q", toIDP.Status, toIDP.Location)
			}
			if got := loc.Query()["ui_locales"]; len(got) != 1 || got[0] != tt.uiLocales {
				t.Fatalf("ui_locales = %q, want %q", got, tt.uiLocales)
			}

			form := b.Follow(http.MethodGet, toIDP.Location, nil)
			if form.Status != http.StatusOK || !strings.Contains(form.Body, `<html lang="`+tt.lang+`"`) || !strings.Contains(form.Body, tt.eidLabel) {
				t.Fatalf("the test eID in %s: %d %s", tt.lang, form.Status, form.Body)
			}
			fields := form.HiddenFields(t)
			fields.Set("national_id", rightID)
			decide := b.Follow(http.MethodPost, in.URL+"/idp/login", fields)
			if decide.Status != http.StatusOK || !strings.Contains(decide.Body, `<html lang="`+tt.lang+`"`) || !strings.Contains(decide.Body, tt.decide) {
				t.Fatalf("the decision page in %s: %d %s", tt.lang, decide.Status, decide.Body)
			}
		})
	}
}
