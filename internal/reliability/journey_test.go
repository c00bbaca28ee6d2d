package reliability_test

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

// browser is a cookie-keeping client that follows redirects itself, so that
// the journey sees every hop.
type browser struct {
	t      *testing.T
	client *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status   int
	url      string
	location string
	body     string
}

func (b *browser) do(method, u string, form url.Values) page {
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
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	p := page{status: resp.StatusCode, url: u, body: string(raw)}
	if loc := resp.Header.Get("Location"); loc != "" {
		l, err := req.URL.Parse(loc)
		if err != nil {
			b.t.Fatal(err)
		}
		p.location = l.String()
	}
	return p
}

// follow requests u and follows redirects within base until a page that is
// not one, or a redirect that leaves base (returned as is).
func (b *browser) follow(base, method, u string, form url.Values) page {
	b.t.Helper()
	p := b.do(method, u, form)
	for i := 0; p.status >= 300 && p.status < 400 && strings.HasPrefix(p.location, base); i++ {
		if i > 10 {
			b.t.Fatalf("redirect loop at %s", p.location)
		}
		p = b.do(http.MethodGet, p.location, nil)
	}
	return p
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)"`)

func hiddenFields(t *testing.T, p page) url.Values {
	t.Helper()
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(p.body, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	if len(v) == 0 {
		t.Fatalf("no form on %s (%d): %.2000s", p.url, p.status, p.body)
	}
	return v
}

// consentWithTestEID opens a consent link, proves the individual's identity
// through the built-in test eID and accepts (or rejects); it returns the
// redirect to the organization.
func consentWithTestEID(t *testing.T, base, link, nationalID, decision string) string {
	t.Helper()
	b := newBrowser(t)
	start := b.follow(base, "GET", link, nil)
	if start.status != 200 || strings.Contains(start.body, nationalID) {
		t.Fatalf("consent page: %d (the national id must never show in full)", start.status)
	}
	form := b.follow(base, "GET", link+"/login", nil)
	if !strings.Contains(form.body, `name="national_id"`) {
		t.Fatalf("no test eID form at %s: %d %.2000s", form.url, form.status, form.body)
	}
	v := hiddenFields(t, form)
	v.Set("national_id", nationalID)
	decide := b.follow(base, "POST", base+"/idp/login", v)
	if decide.status != 200 || !strings.Contains(decide.body, `name="_csrf"`) {
		t.Fatalf("decision page at %s: %d %.2000s", decide.url, decide.status, decide.body)
	}
	d := hiddenFields(t, decide)
	d.Set("decision", decision)
	done := b.do("POST", link, d)
	if done.status != http.StatusSeeOther {
		t.Fatalf("decision: %d %.2000s", done.status, done.body)
	}
	return done.location
}
