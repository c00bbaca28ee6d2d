package e2e

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/browsertest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// The consent journey in a real headless Chromium against the real flowd:
// what an individual does with the link on a phone, and what the
// organization sees of it through the API, its webhooks and its redirect.

func TestConsentJourneyInABrowser(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t)
	ctx := e.b.Ctx

	t.Run("accept", func(t *testing.T) {
		e.fresh(t)
		c := e.createFlow(t, true)
		e.hooks.waitFor("flow.created")

		run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
		p := waitPage(t, ctx, "Acme Bank asks for your consent")
		for _, want := range []string{"Regarding", "Mortgage application", c.ReferenceID, "•••••••••01", "Continue with electronic ID", "Answer by"} {
			if !strings.Contains(p.text, want) {
				t.Errorf("the first page lacks %q:\n%s", want, p.text)
			}
		}
		if strings.Contains(p.text, rightID) {
			t.Fatalf("the page shows the national id in full")
		}
		var lang string
		run(t, ctx, chromedp.AttributeValue(`html`, "lang", &lang, nil, chromedp.ByQuery))
		if lang != "en" {
			t.Errorf("html lang = %q", lang)
		}
		shot(t, ctx, "1-request")
		checkPageHTML(t, c.Links.Consent.Href)
		if f := e.flow(t, c.FlowID); f.Flow.Consent.Status != "Opened" || f.Flow.Version != 2 || f.Flow.Status != "active" {
			t.Fatalf("after opening the link, the API shows %+v", f)
		}
		e.hooks.waitFor("flow.opened")

		signIn(t, ctx, rightID, "2-test-eid")
		p = waitPage(t, ctx, "Do you consent?")
		if !strings.Contains(p.text, "Acme Bank asks for your consent") || !strings.Contains(p.text, "127.0.0.1") {
			t.Errorf("the decision page:\n%s", p.text)
		}
		shot(t, ctx, "3-decide")

		run(t, ctx, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
		p = waitPage(t, ctx, "Back at Acme Bank")
		u, _ := url.Parse(p.url)
		q := u.Query()
		if !strings.HasPrefix(p.url, e.site.srv.URL+"/done?") || q.Get("case") != "42" || q.Get("flowId") != c.FlowID ||
			q.Get("referenceId") != c.ReferenceID || q.Get("status") != "accepted" {
			t.Fatalf("landed at %s", p.url)
		}
		shot(t, ctx, "4-landed")

		if f := e.flow(t, c.FlowID); f.Flow.Consent.Status != "Accepted" || f.Flow.Status != "completed" || f.Flow.Version != 3 {
			t.Fatalf("after accepting, the API shows %+v", f)
		}
		var archived struct {
			Data []struct {
				ID       string `json:"id"`
				Status   string `json:"status"`
				Archived bool   `json:"archived"`
			} `json:"data"`
		}
		call(t, e.api, "GET", e.in.URL+"/api/flows?archived=true", "", &archived)
		if len(archived.Data) != 1 || archived.Data[0].ID != c.FlowID || !archived.Data[0].Archived || archived.Data[0].Status != "Accepted" {
			t.Fatalf("archived flows: %+v", archived.Data)
		}

		ev := e.hooks.waitFor("flow.accepted")
		if got := strings.Join(e.hooks.eventTypes(), " "); got != "flow.created flow.opened flow.accepted" {
			t.Fatalf("webhooks in order of arrival: %s", got)
		}
		data := ev["data"].(map[string]any)
		if data["flowId"] != c.FlowID || data["status"] != "Accepted" || data["flowStatus"] != "completed" || data["version"] != float64(3) {
			t.Fatalf("flow.accepted: %v", ev)
		}

		// The link now shows the answer: no decision form, the receipt, withdrawal.
		run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
		if p := waitPage(t, ctx, "You accepted this request"); strings.Contains(p.text, "Do you consent?") || !strings.Contains(p.text, "Withdraw consent") {
			t.Fatalf("the answered link:\n%s", p.text)
		}
		shot(t, ctx, "5-answered")
	})

	t.Run("two tabs and a double submit", func(t *testing.T) {
		e.fresh(t)
		c := e.createFlow(t, false)
		run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
		waitPage(t, ctx, "Continue with electronic ID")
		signIn(t, ctx, rightID, "")
		waitPage(t, ctx, "Do you consent?")

		// A second tab of the same browser shows the same form.
		tab := e.b.NewTab(browsertest.Phone)
		run(t, tab, chromedp.Navigate(c.Links.Consent.Href))
		waitPage(t, tab, "Do you consent?")

		run(t, ctx, chromedp.Click(`button[value=reject]`, chromedp.ByQuery))
		if p := waitPage(t, ctx, "Back at Acme Bank"); !strings.Contains(p.url, "status=rejected") {
			t.Fatalf("landed at %s", p.url)
		}
		run(t, tab, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
		p := waitPage(t, tab, "This request is closed")
		if !strings.Contains(p.text, "already been answered") || !strings.Contains(p.url, "/consent/") {
			t.Fatalf("the second tab's answer:\n%s", p.text)
		}
		shot(t, tab, "second-tab")
		if f := e.flow(t, c.FlowID); f.Flow.Consent.Status != "Rejected" || f.Flow.Version != 3 {
			t.Fatalf("the second tab changed the flow: %+v", f)
		}

		// Two POSTs of one form at once, as a double tap sends them: one answer.
		c = e.createFlow(t, false)
		run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
		waitPage(t, ctx, "Do you consent?") // still signed in as the right person
		var token string
		run(t, ctx, chromedp.AttributeValue(`input[name=_csrf]`, "value", &token, nil, chromedp.ByQuery))
		cookies := e.cookieHeader(t)
		before := e.site.landings()
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, _ := e.post(t, c.Links.Consent.Href, url.Values{"_csrf": {token}, "decision": {"accept"}}, cookies, e.sameOrigin()...)
				statuses[i] = resp.StatusCode
				if resp.StatusCode == http.StatusSeeOther && !strings.HasPrefix(resp.Header.Get("Location"), e.site.srv.URL+"/done?") {
					t.Errorf("redirect to %s", resp.Header.Get("Location"))
				}
			}()
		}
		wg.Wait()
		if !(statuses[0] == 303 && statuses[1] == 410 || statuses[0] == 410 && statuses[1] == 303) {
			t.Fatalf("double submit answered %v, want one 303 and one 410", statuses)
		}
		if f := e.flow(t, c.FlowID); f.Flow.Consent.Status != "Accepted" || f.Flow.Version != 3 {
			t.Fatalf("after a double submit: %+v", f)
		}
		if e.site.landings() != before {
			t.Fatal("the site was visited by a test that did not follow redirects")
		}
	})

	t.Run("wrong person, then reject", func(t *testing.T) {
		e.fresh(t)
		c := e.createFlow(t, false)
		run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
		waitPage(t, ctx, "Continue with electronic ID")
		signIn(t, ctx, wrongID, "")
		p := waitPage(t, ctx, "This request is for someone else")
		for _, secret := range []string{"Acme Bank", c.ReferenceID, "Mortgage", "01", "Accept", "Reject"} {
			if strings.Contains(p.text, secret) {
				t.Errorf("the page for someone else reveals %q:\n%s", secret, p.text)
			}
		}
		shot(t, ctx, "1-someone-else")

		// Nor can the wrong person answer by posting the form anyway.
		resp, _ := e.post(t, c.Links.Consent.Href, url.Values{"decision": {"accept"}}, e.cookieHeader(t), e.sameOrigin()...)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a decision by the wrong person: %d", resp.StatusCode)
		}
		if f := e.flow(t, c.FlowID); f.Flow.Consent.Status != "Opened" || f.Flow.Status != "active" {
			t.Fatalf("the wrong person changed the flow: %+v", f)
		}
		if !strings.Contains(e.in.Logs.String(), "consent.identity_mismatch") || strings.Contains(e.in.Logs.String(), wrongID) {
			t.Fatal("the mismatch is not in the log, or the log names the national id")
		}

		// Signing in as someone else, the right person, rejects.
		toEIDForm(t, ctx)
		run(t, ctx, chromedp.SetValue(`#national_id`, rightID, chromedp.ByQuery), chromedp.Click(`form button[type=submit]`, chromedp.ByQuery))
		waitPage(t, ctx, "Do you consent?")
		run(t, ctx, chromedp.Click(`button[value=reject]`, chromedp.ByQuery))
		p = waitPage(t, ctx, "Back at Acme Bank")
		u, _ := url.Parse(p.url)
		if q := u.Query(); q.Get("status") != "rejected" || q.Get("flowId") != c.FlowID || q.Get("referenceId") != c.ReferenceID || q.Get("case") != "42" {
			t.Fatalf("landed at %s", p.url)
		}
		if f := e.flow(t, c.FlowID); f.Flow.Consent.Status != "Rejected" || f.Flow.Status != "completed" {
			t.Fatalf("after rejecting: %+v", f)
		}
	})

	t.Run("CSRF token missing", func(t *testing.T) {
		e.fresh(t)
		c := e.createFlow(t, false)
		run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
		waitPage(t, ctx, "Continue with electronic ID")
		signIn(t, ctx, rightID, "")
		waitPage(t, ctx, "Do you consent?")
		cookies := e.cookieHeader(t)
		for _, tt := range []struct {
			name    string
			form    url.Values
			headers []string
		}{
			{"no token, no fetch metadata", url.Values{"decision": {"accept"}}, nil},
			{"a made-up token", url.Values{"decision": {"accept"}, "_csrf": {"forged"}}, nil},
			{"the token browsers with fetch metadata get", url.Values{"decision": {"accept"}, "_csrf": {"_echo_csrf_using_sec_fetch_site_"}}, nil},
			{"another site's form", url.Values{"decision": {"accept"}}, []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}},
		} {
			resp, body := e.post(t, c.Links.Consent.Href, tt.form, cookies, tt.headers...)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "The form has expired") {
				t.Errorf("%s: %d\n%s", tt.name, resp.StatusCode, body)
			}
		}
		if f := e.flow(t, c.FlowID); f.Flow.Consent.Status != "Opened" || f.Flow.Status != "active" || f.Flow.Version != 2 {
			t.Fatalf("a refused POST changed the flow: %+v", f)
		}
		// The page still works for the person.
		run(t, ctx, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
		waitPage(t, ctx, "Back at Acme Bank")
	})

	t.Run("cancelled, deleted and unknown links", func(t *testing.T) {
		e.fresh(t)
		c := e.createFlow(t, false)
		run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
		waitPage(t, ctx, "Continue with electronic ID")
		if resp := call(t, e.api, "POST", e.in.URL+"/api/flows/"+c.FlowID+"/cancel", "", nil); resp.StatusCode != 200 {
			t.Fatalf("cancel: %d", resp.StatusCode)
		}
		run(t, ctx, chromedp.Reload())
		if p := waitPage(t, ctx, "This request is closed"); !strings.Contains(p.text, "withdrawn") || strings.Contains(p.text, "electronic ID") {
			t.Fatalf("the page of a cancelled flow:\n%s", p.text)
		}
		shot(t, ctx, "cancelled")
		if resp, _ := e.post(t, c.Links.Consent.Href, url.Values{"decision": {"accept"}}, "", e.sameOrigin()...); resp.StatusCode != http.StatusGone {
			t.Fatalf("a decision on a cancelled flow: %d", resp.StatusCode)
		}
		if resp := call(t, e.api, "DELETE", e.in.URL+"/api/flows/"+c.FlowID, "", nil); resp.StatusCode != 200 {
			t.Fatalf("delete: %d", resp.StatusCode)
		}
		run(t, ctx, chromedp.Reload())
		p := waitPage(t, ctx, "Link not found")
		if strings.Contains(p.text, "Acme") || strings.Contains(p.text, c.ReferenceID) {
			t.Fatalf("the page of a deleted flow:\n%s", p.text)
		}
		shot(t, ctx, "deleted")
		for _, link := range []string{c.Links.Consent.Href, e.in.URL + "/consent/" + strings.Repeat("A", 43), e.in.URL + "/consent/nope"} {
			resp, err := http.Get(link)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 404 || !strings.Contains(string(b), "Link not found") {
				t.Errorf("%s: %d", link, resp.StatusCode)
			}
		}
		resp, _ := e.post(t, c.Links.Consent.Href, url.Values{"decision": {"accept"}}, "", e.sameOrigin()...)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("a decision on a deleted flow: %d", resp.StatusCode)
		}
	})

	t.Run("Norwegian by Accept-Language and the switch", func(t *testing.T) {
		e.fresh(t)
		c := e.createFlow(t, false)
		run(t, ctx, network.SetExtraHTTPHeaders(network.Headers{"Accept-Language": "nb-NO,nb;q=0.9,en;q=0.5"}),
			chromedp.Navigate(c.Links.Consent.Href))
		p := waitPage(t, ctx, "Acme Bank ber om ditt samtykke")
		var lang string
		run(t, ctx, chromedp.AttributeValue(`html`, "lang", &lang, nil, chromedp.ByQuery))
		if lang != "nb" || !strings.Contains(p.text, "Fortsett med elektronisk ID") || !strings.Contains(p.text, "Svarfrist") {
			t.Fatalf("lang %q:\n%s", lang, p.text)
		}
		shot(t, ctx, "1-forespørsel")
		run(t, ctx, chromedp.Click(`main a.button`, chromedp.ByQuery))
		p = waitPage(t, ctx, "Fødselsnummer")
		if !strings.Contains(p.text, "TEST-identitetstilbyder") {
			t.Fatalf("the test eID in Norwegian:\n%s", p.text)
		}
		run(t, ctx, chromedp.SetValue(`#national_id`, rightID, chromedp.ByQuery))
		shot(t, ctx, "2-test-eid")
		run(t, ctx, chromedp.Click(`form button[type=submit]`, chromedp.ByQuery))
		waitPage(t, ctx, "Samtykker du?")
		shot(t, ctx, "3-samtykke")

		// The switch turns the page into English and the choice sticks.
		run(t, ctx, chromedp.Click(`a.lang-switch`, chromedp.ByQuery))
		p = waitPage(t, ctx, "Do you consent?")
		run(t, ctx, chromedp.AttributeValue(`html`, "lang", &lang, nil, chromedp.ByQuery))
		if lang != "en" || !strings.Contains(p.text, "Norsk") {
			t.Fatalf("after the switch, lang %q:\n%s", lang, p.text)
		}
		shot(t, ctx, "4-switched")
		run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
		waitPage(t, ctx, "Do you consent?")
		run(t, ctx, chromedp.Click(`a.lang-switch`, chromedp.ByQuery))
		waitPage(t, ctx, "Samtykker du?")
		run(t, ctx, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
		if p := waitPage(t, ctx, "Back at Acme Bank"); !strings.Contains(p.url, "status=accepted") {
			t.Fatalf("landed at %s", p.url)
		}
	})
}

func TestConsentWithoutProofInABrowser(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t, flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"))
	ctx := e.b.Ctx
	c := e.createFlow(t, true)
	e.hooks.waitFor("flow.created")
	run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
	p := waitPage(t, ctx, "Do you consent?")
	if strings.Contains(p.text, "electronic ID") || !strings.Contains(p.text, "Acme Bank asks for your consent") {
		t.Fatalf("without proof, the decision form comes first:\n%s", p.text)
	}
	shot(t, ctx, "decide")
	// Deliveries run concurrently; waiting for each makes their order certain.
	e.hooks.waitFor("flow.opened")
	run(t, ctx, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
	p = waitPage(t, ctx, "Back at Acme Bank")
	if u, _ := url.Parse(p.url); u.Query().Get("status") != "accepted" || u.Query().Get("flowId") != c.FlowID {
		t.Fatalf("landed at %s", p.url)
	}
	e.hooks.waitFor("flow.accepted")
	if got := strings.Join(e.hooks.eventTypes(), " "); got != "flow.created flow.opened flow.accepted" {
		t.Fatalf("webhooks: %s", got)
	}
	if f := e.flow(t, c.FlowID); f.Flow.Consent.Status != "Accepted" || f.Flow.Status != "completed" {
		t.Fatalf("%+v", f)
	}
}

func TestExpiredConsentLinkInABrowser(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t, flowdtest.WithEnv("FLOWD_CONSENT_TTL", "1s"), flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"))
	ctx := e.b.Ctx
	c := e.createFlow(t, false)
	// Wait for the condition — the link answers 410 — never for a time.
	testwait.For(t, "the consent link to expire (410)", func() (bool, string) {
		resp, err := http.Get(c.Links.Consent.Href)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusGone, resp.Status
	})
	run(t, ctx, chromedp.Navigate(c.Links.Consent.Href))
	p := waitPage(t, ctx, "This request is closed")
	if !strings.Contains(p.text, "expired") || strings.Contains(p.text, "Accept") {
		t.Fatalf("the expired link:\n%s", p.text)
	}
	shot(t, ctx, "expired")
	resp, body := e.post(t, c.Links.Consent.Href, url.Values{"decision": {"accept"}}, "", e.sameOrigin()...)
	if resp.StatusCode != http.StatusGone || !strings.Contains(body, "expired") {
		t.Fatalf("a decision on an expired link: %d", resp.StatusCode)
	}
	if f := e.flow(t, c.FlowID); f.Flow.Consent.Status == "Accepted" || f.Flow.Status == "completed" {
		t.Fatalf("an expired link took a decision: %+v", f)
	}
}

// checkPageHTML fetches a consent page as a browser would and checks what
// its markup and headers promise: no script, nothing from other sites, a
// strict CSP, never cached, a lang attribute, and no national id in full.
func checkPageHTML(t *testing.T, link string) {
	t.Helper()
	req, _ := http.NewRequest("GET", link, nil)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	html := string(b)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	if strings.Contains(html, "<script") || strings.Contains(html, rightID) || !strings.Contains(html, `<html lang="en">`) {
		t.Errorf("the page's markup:\n%s", html)
	}
	for _, attr := range []string{`src="`, `href="`} {
		for _, part := range strings.Split(html, attr)[1:] {
			if !strings.HasPrefix(part, "/") {
				t.Errorf("a reference off the site: %s%s", attr, part[:min(len(part), 40)])
			}
		}
	}
}
