package e2e

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/flowdtest"
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
			b := newHTTPBrowser(t, tt.acceptLanguage)
			link := c.Links.Consent.Href
			if tt.switchTo != "" {
				link += "?lang=" + tt.switchTo
			}
			start := b.get(link)
			m := regexp.MustCompile(`<a class="button block" href="([^"]+/login)"`).FindStringSubmatch(start.body)
			if start.status != http.StatusOK || !strings.Contains(start.body, `<html lang="`+tt.lang+`"`) || m == nil {
				t.Fatalf("consent page in %s with a sign-in link: %d %s", tt.lang, start.status, start.body)
			}

			toIDP := b.get(in.URL + html.UnescapeString(m[1]))
			loc, err := url.Parse(toIDP.location)
			if toIDP.status != http.StatusSeeOther || err != nil || loc.Path != "/oauth/authorize" {
				t.Fatalf("the sign-in link: %d %q", toIDP.status, toIDP.location)
			}
			if got := loc.Query()["ui_locales"]; len(got) != 1 || got[0] != tt.uiLocales {
				t.Fatalf("ui_locales = %q, want %q", got, tt.uiLocales)
			}

			form := b.follow(toIDP.location)
			if form.status != http.StatusOK || !strings.Contains(form.body, `<html lang="`+tt.lang+`"`) || !strings.Contains(form.body, tt.eidLabel) {
				t.Fatalf("the test eID in %s: %d %s", tt.lang, form.status, form.body)
			}
			fields := url.Values{"national_id": {rightID}}
			for _, f := range regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)"`).FindAllStringSubmatch(form.body, -1) {
				fields.Set(f[1], html.UnescapeString(f[2]))
			}
			decide := b.followPost(in.URL+"/idp/login", fields)
			if decide.status != http.StatusOK || !strings.Contains(decide.body, `<html lang="`+tt.lang+`"`) || !strings.Contains(decide.body, tt.decide) {
				t.Fatalf("the decision page in %s: %d %s", tt.lang, decide.status, decide.body)
			}
		})
	}
}

// httpBrowser is a cookie-keeping client with a language that shows every
// redirect to its caller.
type httpBrowser struct {
	t              *testing.T
	client         *http.Client
	acceptLanguage string
}

// httpPage is one response: its status, Location (resolved) and body.
type httpPage struct {
	status   int
	location string
	body     string
}

func newHTTPBrowser(t *testing.T, acceptLanguage string) *httpBrowser {
	jar, _ := cookiejar.New(nil)
	return &httpBrowser{t: t, acceptLanguage: acceptLanguage, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *httpBrowser) do(method, u string, form url.Values) httpPage {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Accept-Language", b.acceptLanguage)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		// A browser's POST of flowd's own form.
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	p := httpPage{status: resp.StatusCode, body: string(raw)}
	if loc := resp.Header.Get("Location"); loc != "" {
		l, err := req.URL.Parse(loc)
		if err != nil {
			b.t.Fatal(err)
		}
		p.location = l.String()
	}
	return p
}

func (b *httpBrowser) get(u string) httpPage { return b.do(http.MethodGet, u, nil) }

// follow GETs u and follows redirects to a page that is not one.
func (b *httpBrowser) follow(u string) httpPage {
	b.t.Helper()
	return b.followFrom(b.get(u))
}

// followPost POSTs form to u and follows the redirects after it.
func (b *httpBrowser) followPost(u string, form url.Values) httpPage {
	b.t.Helper()
	return b.followFrom(b.do(http.MethodPost, u, form))
}

func (b *httpBrowser) followFrom(p httpPage) httpPage {
	b.t.Helper()
	for i := 0; p.status >= 300 && p.status < 400; i++ {
		if i > 10 {
			b.t.Fatalf("redirect loop at %s", p.location)
		}
		p = b.get(p.location)
	}
	return p
}
