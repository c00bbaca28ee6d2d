package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestEveryConsolePageNeedsAStaffSession enumerates the router's console
// routes, so that a new page cannot be forgotten, and requests each without
// a session, with a forged session cookie, and with an end user's consent
// session passed off as a console session: GETs are sent to sign in, other
// methods refused, and no page content is ever served.
func TestEveryConsolePageNeedsAStaffSession(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})

	// An end user's genuine consent session, through the test eID.
	b := formbrowser.New(t)
	form := b.Follow(http.MethodGet, ls.URL+"/consent/auth/login?return=%2Fconsent%2Fsigned-in", nil)
	v := form.HiddenFields(t)
	v.Set("national_id", "01017012345")
	b.Follow(http.MethodPost, ls.URL+"/idp/login", v)
	u, _ := url.Parse(ls.URL + "/consent/")
	var consentCookie string
	for _, c := range b.Jar().Cookies(u) {
		if c.Name == "flowd_consent" {
			consentCookie = c.Value
		}
	}
	if consentCookie == "" {
		t.Fatal("the test eID sign-in gave no consent session")
	}

	param := regexp.MustCompile(`:[^/]+`)
	cookies := map[string]string{
		"no session":                   "",
		"a forged session":             "flowd_console=MTcwMDAwMDAwMHxkZWFkYmVlZnw=",
		"garbage":                      "flowd_console=%00%0d%0a",
		"a consent session as console": "flowd_console=" + consentCookie,
	}
	checked := 0
	for _, r := range ls.Srv.Echo().Routes() {
		if !strings.HasPrefix(r.Path, "/console") || strings.HasPrefix(r.Path, "/console/auth/") || r.Path == "/console/signed-out" ||
			strings.HasPrefix(r.Method, "echo_route_any") || r.Method == "PROPFIND" || r.Method == "REPORT" {
			continue
		}
		checked++
		path := param.ReplaceAllString(r.Path, "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21")
		for name, cookie := range cookies {
			req, _ := http.NewRequest(r.Method, ls.URL+path, strings.NewReader("_csrf=x&role=admin"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Accept", "text/html")
			if cookie != "" {
				req.Header.Set("Cookie", cookie)
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			switch {
			case r.Method == http.MethodGet || r.Method == http.MethodHead:
				if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/auth/login?return=") {
					t.Errorf("%s %s with %s: %d Location %q; want 303 to sign in", r.Method, r.Path, name, resp.StatusCode, loc)
				}
			default:
				if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s %s with %s: %d; want 401 or 403", r.Method, r.Path, name, resp.StatusCode)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no console route was checked")
	}
}
