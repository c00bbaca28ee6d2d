package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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

// The consent tests' environment and their browser steps: the organization's
// web site, its API client and webhook receiver, and the waits for a page.

const (
	rightID = "12345678901"
	wrongID = "10987654321"
)

// site is the organization's own web site, where the individual lands after
// answering; it remembers the query of each landing.
type site struct {
	srv     *httptest.Server
	mu      sync.Mutex
	landing []url.Values
}

func newSite(t *testing.T) *site {
	s := &site{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.landing = append(s.landing, r.URL.Query())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, `<!doctype html><html lang="en"><title>Acme Bank</title><h1 id="landed">Back at Acme Bank</h1>`)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) landings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.landing)
}

// consentEnv is one flowd, one organization with its API client, webhook
// receiver and web site, and one browser shared by the subtests.
type consentEnv struct {
	in    *flowdtest.Instance
	org   org
	api   *http.Client
	hooks *receiver
	site  *site
	b     *browsertest.Browser
}

func newConsentEnv(t *testing.T, opts ...flowdtest.Option) *consentEnv {
	in := flowdtest.Start(t, opts...)
	o, api := createOrgAndClient(t, in, "Acme Bank", "ACME")
	e := &consentEnv{in: in, org: o, api: api, hooks: newReceiver(t, o.WebhookSecret), site: newSite(t),
		b: browsertest.New(t, browsertest.Phone)}
	e.b.Run(network.Enable())
	return e
}

// createdFlow is a flow as the API created it.
type createdFlow struct {
	FlowID      string `json:"flowId"`
	ReferenceID string `json:"referenceId"`
	Links       struct {
		Consent struct{ Href string } `json:"consent"`
	} `json:"_links"`
}

func (e *consentEnv) createFlow(t *testing.T, withHooks bool) createdFlow {
	t.Helper()
	hook := ""
	if withHooks {
		hook = `,"webhookUrl":"` + e.hooks.srv.URL + `/hooks"`
	}
	var c createdFlow
	resp := call(t, e.api, "POST", e.in.URL+"/api/flows", `{"nationalId":"`+rightID+`","lastName":"Nordmann",`+
		`"redirectUrl":"`+e.site.srv.URL+`/done?case=42","referenceName":"Mortgage application"`+hook+`}`, &c)
	if resp.StatusCode != 201 || c.Links.Consent.Href == "" {
		t.Fatalf("create: %d %+v", resp.StatusCode, c)
	}
	return c
}

// apiFlow is the part of GET /api/flows/{id} these tests look at.
type apiFlow struct {
	Flow struct {
		Status  string `json:"status"`
		Version int    `json:"version"`
		Consent struct {
			Status string `json:"status"`
		} `json:"consent"`
	} `json:"flow"`
}

func (e *consentEnv) flow(t *testing.T, id string) apiFlow {
	t.Helper()
	var f apiFlow
	if resp := call(t, e.api, "GET", e.in.URL+"/api/flows/"+id, "", &f); resp.StatusCode != 200 {
		t.Fatalf("GET flow: %d", resp.StatusCode)
	}
	return f
}

// fresh forgets the browser's cookies and language, as a new visitor.
func (e *consentEnv) fresh(t *testing.T) {
	e.b.ClearCookies()
	e.b.Run(network.SetExtraHTTPHeaders(network.Headers{}))
}

// page is what a browser tab shows: its address and visible text.
type page struct{ url, text string }

// waitPage waits until the tab shows a complete page whose text contains
// want, and returns it; navigations in between are expected.
func waitPage(t *testing.T, ctx context.Context, want string) page {
	t.Helper()
	p := browsertest.WaitPage(t, ctx, want)
	return page{url: p.URL, text: p.Text}
}

// toEIDForm follows the consent page's sign-in button to the test eID's form.
func toEIDForm(t *testing.T, ctx context.Context) {
	t.Helper()
	browsertest.ClickAndAwait(t, ctx, `main a.button`, "the test eID's form", browsertest.Selector("#national_id"))
}

func run(t *testing.T, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := context.WithDeadline(ctx, testwait.Deadline(t))
	defer cancel()
	if err := chromedp.Run(c, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// shot saves a phone-width screenshot of the tab under the test's output folder.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	browsertest.Screenshot(t, ctx, name)
}

// signIn goes from the consent page through the test eID as nationalID and
// back; the page it returns is the consent page the person then sees.
func signIn(t *testing.T, ctx context.Context, nationalID, screenshot string) {
	t.Helper()
	toEIDForm(t, ctx)
	run(t, ctx, chromedp.SetValue(`#national_id`, nationalID, chromedp.ByQuery))
	if screenshot != "" {
		shot(t, ctx, screenshot)
	}
	run(t, ctx, chromedp.Click(`form button[type=submit]`, chromedp.ByQuery))
}

// cookieHeader returns the browser's cookies for flowd as a Cookie header.
func (e *consentEnv) cookieHeader(t *testing.T) string {
	t.Helper()
	var cookies []*network.Cookie
	run(t, e.b.Ctx, chromedp.ActionFunc(func(ctx context.Context) (err error) {
		cookies, err = network.GetCookies().WithURLs([]string{e.in.URL + "/consent/"}).Do(ctx)
		return err
	}))
	var parts []string
	for _, c := range cookies {
		parts = append(parts, c.Name+"="+c.Value)
	}
	return strings.Join(parts, "; ")
}

// post sends a decision outside the browser, with the browser's cookies and
// the given extra headers, and does not follow redirects.
func (e *consentEnv) post(t *testing.T, link string, form url.Values, cookies string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", link, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Cookie", cookies)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// sameOrigin are the headers a browser sends with a form POST of flowd's own page.
func (e *consentEnv) sameOrigin() []string {
	return []string{"Sec-Fetch-Site", "same-origin", "Origin", e.in.URL}
}

// eventTypes returns the types of the webhooks received, in order of arrival.
func (r *receiver) eventTypes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var types []string
	for _, ev := range r.events {
		types = append(types, ev["type"].(string))
	}
	return types
}
