package web_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestTheFrontPageLeadsToEverySurface: GET / is a page, not a 404, and each
// of its links answers (a redirect to a sign-in counts).
func TestTheFrontPageLeadsToEverySurface(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	resp, body := do(t, http.MethodGet, ts.url+"/", "", "")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	links := regexp.MustCompile(`<a href="(/[^"]*)"`).FindAllStringSubmatch(body, -1)
	want := map[string]bool{"/docs": false, "/console": false, "/my": false, "/receipts/verify": false}
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, l := range links {
		if _, ok := want[l[1]]; ok {
			want[l[1]] = true
		}
		resp, err := noRedirects.Get(ts.url + l[1])
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			t.Errorf("the front page's link %s answers %d", l[1], resp.StatusCode)
		}
	}
	for path, found := range want {
		if !found {
			t.Errorf("the front page does not link %s:\n%s", path, body)
		}
	}
}
