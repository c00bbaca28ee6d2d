// Package formbrowser is a browser without JavaScript for the tests that drive
// flowd's HTML pages over real HTTP: it keeps cookies, asks for text/html in
// a chosen language, submits forms as application/x-www-form-urlencoded and
// shows every redirect to its caller, who may follow them or look at each hop.
// The sign-in, consent and console tests of package web, the end-to-end tests
// and the reliability suite share it instead of each keeping a copy; the
// chromedp suite in internal/browsertest is the real browser, for what needs
// scripts and rendering.
//
// It imports nothing of flowd, so that package web's own tests can use it.
package formbrowser

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// maxRedirects bounds Follow, so that a redirect loop fails the test instead
// of hanging it.
const maxRedirects = 10

// Browser is one browser profile: a cookie jar and the headers it sends. Its
// methods fail the test it was made for on any transport error, so a caller
// only looks at the pages.
type Browser struct {
	t      testing.TB
	client *http.Client

	// AcceptLanguage, when set, is sent as Accept-Language with every request.
	AcceptLanguage string
	// FormHeader is added to every form POST, such as the fetch metadata
	// (Sec-Fetch-Site: same-origin) a real browser sends with a page's own
	// form. It is empty by default: echo's CSRF middleware on the consent
	// form admits a same-origin POST without its token, so a browser that
	// always sent it would let a test of a missing or forged token pass for
	// the wrong reason.
	FormHeader http.Header
	// Scope, when set, is the address prefix Follow keeps to: a redirect to
	// anywhere else (an organization's site, say) is returned, not followed.
	Scope string
}

// Page is one response, read in full.
type Page struct {
	Status int
	// URL is the address requested.
	URL string
	// Location is the response's Location resolved against URL; empty when
	// the response has none.
	Location string
	Body     string
	Header   http.Header
}

// New returns a browser with an empty cookie jar that does not follow
// redirects by itself, for the test t.
func New(t testing.TB) *Browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Browser{t: t, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// Jar is the browser's cookie jar, for a test that plants, drops or reads a
// cookie.
func (b *Browser) Jar() http.CookieJar { return b.client.Jar }

// Do sends one request; form, when not nil, is the body of a form submission.
func (b *Browser) Do(method, u string, form url.Values) Page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(b.t.Context(), method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if b.AcceptLanguage != "" {
		req.Header.Set("Accept-Language", b.AcceptLanguage)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, vs := range b.FormHeader {
			req.Header[k] = vs
		}
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s: reading the body: %v", method, u, err)
	}
	p := Page{Status: resp.StatusCode, URL: u, Body: string(raw), Header: resp.Header}
	if loc := resp.Header.Get("Location"); loc != "" {
		l, err := req.URL.Parse(loc)
		if err != nil {
			b.t.Fatalf("%s %s: Location %q: %v", method, u, loc, err)
		}
		p.Location = l.String()
	}
	return p
}

// Get requests u.
func (b *Browser) Get(u string) Page {
	b.t.Helper()
	return b.Do(http.MethodGet, u, nil)
}

// Post submits form to u.
func (b *Browser) Post(u string, form url.Values) Page {
	b.t.Helper()
	return b.Do(http.MethodPost, u, form)
}

// Follow sends a request as Do does, then follows the redirects (with GETs,
// as browsers do after a form) to a page that is not one, or to one that
// leaves Scope.
func (b *Browser) Follow(method, u string, form url.Values) Page {
	b.t.Helper()
	p := b.Do(method, u, form)
	for i := 0; isRedirect(p) && strings.HasPrefix(p.Location, b.Scope); i++ {
		if i == maxRedirects {
			b.t.Fatalf("more than %d redirects, the last to %s", maxRedirects, p.Location)
		}
		p = b.Get(p.Location)
	}
	return p
}

// isRedirect reports whether p sends the browser on to its Location.
func isRedirect(p Page) bool {
	return p.Status >= 300 && p.Status < 400 && p.Location != ""
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)"`)

// HiddenFields returns the hidden fields of p's forms (the CSRF token, the
// sign-in request), which a browser submits with what the person types. A
// page without any fails t: the caller expected a form.
func (p Page) HiddenFields(t testing.TB) url.Values {
	t.Helper()
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(p.Body, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	if len(v) == 0 {
		t.Fatalf("no form on %s (%d): %.2000s", p.URL, p.Status, p.Body)
	}
	return v
}
