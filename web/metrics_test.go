package web_test

import (
	"net/http"
	"regexp"
	"testing"
)

// TestMetricsLabelsAreBounded sends invented methods and paths, which anyone
// can, and checks that they add no series of their own: every method label
// is a standard method or OTHER, every route label a route or "unmatched".
func TestMetricsLabelsAreBounded(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	requests := []struct{ method, path string }{
		{"GET", "/healthz"},
		{"FROBNICATE", "/healthz"},
		{"X-1", "/healthz"},
		{"get", "/healthz"},
		{"BREW", "/api/flows"},
		{"GET", "/no-such-page-1"},
		{"GET", "/no-such-page-2"},
		{"X-2", "/no-such-page-3"},
		{"GET", "/api/no-such-thing-4"},
		{"DELETE", "/api/tasks"},
		{"GET", "/consent/some-token/extra/segments"},
		{"GET", "/assets/no-such-file-5.css"},
	}
	for _, r := range requests {
		do(t, r.method, ts.url+r.path, "", "")
	}
	_, body := do(t, "GET", ts.url+"/metrics", "", "")

	methods := map[string]bool{"OTHER": true}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace} {
		methods[m] = true
	}
	routes := map[string]bool{"unmatched": true}
	for _, r := range ts.srv.Echo().Routes() {
		routes[r.Path] = true
	}
	series := regexp.MustCompile(`(?m)^flowd_http_requests_total\{method="([^"]*)",route="([^"]*)",status="(\d+)"\} (\d+)$`).FindAllStringSubmatch(body, -1)
	if len(series) == 0 {
		t.Fatalf("no request counts:\n%s", body)
	}
	other := 0
	for _, s := range series {
		if !methods[s[1]] {
			t.Errorf("method label %q from a request: %s", s[1], s[0])
		}
		if !routes[s[2]] {
			t.Errorf("route label %q is no route: %s", s[2], s[0])
		}
		if s[1] == "OTHER" {
			other++
		}
	}
	if other == 0 {
		t.Error("requests with invented methods were not counted as OTHER")
	}
}
