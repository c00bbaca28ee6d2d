package reliability_test

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
)

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]*)"`)

// FuzzConsentDecisionForm posts arbitrary bodies to the consent decision
// form of a fresh flow ("{csrf}" in a body stands for the page's real CSRF
// token, so that the fuzzer reaches the decision itself). No body yields a
// 5xx; a 303 goes to the flow's redirectUrl and is exactly the decision the
// form named; anything else leaves the flow undecided.
func FuzzConsentDecisionForm(f *testing.F) {
	for _, seed := range []string{
		"decision=accept&_csrf={csrf}", "decision=reject&_csrf={csrf}", "decision=maybe&_csrf={csrf}",
		"decision=accept", "_csrf=forged&decision=accept", "decision=accept&decision=reject&_csrf={csrf}",
		"decision=%00&_csrf={csrf}", "%zz&_csrf={csrf}", "decision=ACCEPT&_csrf={csrf}", "_csrf={csrf}&decision=accept%0d%0a",
		"decision=accept&_csrf={csrf}&redirect=https://evil.example", "",
	} {
		f.Add(seed)
	}
	in := flowdtest.Start(f, flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"), flowdtest.WithEnv("FLOWD_LOG_LEVEL", "warn"))
	var o struct{ ID string }
	if err := json.Unmarshal([]byte(in.CLI(f, "", "orgs", "create", "--name", "Fuzz Bank", "--prefix", "FUZZ", "--json")), &o); err != nil {
		f.Fatal(err)
	}
	var c struct{ ClientID, ClientSecret string }
	if err := json.Unmarshal([]byte(in.CLI(f, "", "clients", "create", "--org", o.ID, "--json")), &c); err != nil {
		f.Fatal(err)
	}
	tn := tenant{OrgID: o.ID, ClientID: c.ClientID, ClientSecret: c.ClientSecret}
	tok := tokenFor(f, in.URL, tn)

	f.Fuzz(func(t *testing.T, form string) {
		a, err := do("POST", in.URL+"/api/flows", tok, createBody("FUZZ1", "Berg", ""))
		if err != nil || a.Status != 201 {
			t.Fatalf("create: %v %d %s", err, a.Status, a.Body)
		}
		var created struct {
			FlowID string `json:"flowId"`
			Links  struct {
				Consent struct{ Href string } `json:"consent"`
			} `json:"_links"`
		}
		a.json(t, &created)
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := browser.Get(created.Links.Consent.Href)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := csrfRE.FindSubmatch(page)
		if resp.StatusCode != 200 || m == nil {
			t.Fatalf("consent page: %d, CSRF field found: %v", resp.StatusCode, m != nil)
		}
		body := strings.ReplaceAll(form, "{csrf}", url.QueryEscape(html.UnescapeString(string(m[1]))))
		req, _ := http.NewRequest("POST", created.Links.Consent.Href, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err = browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var got struct {
			Flow struct {
				Consent struct{ Status string } `json:"consent"`
			} `json:"flow"`
		}
		g, err := do("GET", in.URL+"/api/flows/"+created.FlowID, tok, "")
		if err != nil {
			t.Fatal(err)
		}
		g.json(t, &got)
		status := got.Flow.Consent.Status
		if form == "decision=accept&_csrf={csrf}" && status != "Accepted" {
			t.Fatalf("the plain accept form left the flow %s (%d): the target does not reach the decision", status, resp.StatusCode)
		}
		switch {
		case resp.StatusCode >= 500:
			t.Fatalf("%q: %d", form, resp.StatusCode)
		case resp.StatusCode == http.StatusSeeOther && status != "Opened":
			loc := resp.Header.Get("Location")
			v, _ := url.ParseQuery(body)
			want := map[string]string{"accept": "Accepted", "reject": "Rejected"}[v.Get("decision")]
			if !strings.HasPrefix(loc, "https://bank.example/done?") || status != want {
				t.Fatalf("%q: 303 to %q with the flow %s; want %s and the flow's redirectUrl", form, loc, status, want)
			}
		case status != "Opened":
			t.Fatalf("%q: %d, yet the flow is %s", form, resp.StatusCode, status)
		}
	})
}

// tokenFor is tenant.token for any testing.TB.
func tokenFor(tb testing.TB, base string, tn tenant) string {
	tb.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {tn.ClientID}, "client_secret": {tn.ClientSecret}}
	resp, err := http.PostForm(base+"/oauth/token", form)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		tb.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	return tok.AccessToken
}
