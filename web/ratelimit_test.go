package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/webtest"
)

var rateLimitField = regexp.MustCompile(`^"default";r=(\d+);t=(\d+)$`)

// rateLimitOf reads the remaining requests and the seconds to the reset
// from a response's RateLimit field.
func rateLimitOf(t *testing.T, resp *http.Response) (remaining, reset int) {
	t.Helper()
	m := rateLimitField.FindStringSubmatch(resp.Header.Get("RateLimit"))
	if m == nil {
		t.Fatalf("RateLimit %q (RateLimit-Policy %q)", resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"))
	}
	remaining, _ = strconv.Atoi(m[1])
	reset, _ = strconv.Atoi(m[2])
	return remaining, reset
}

// TestRateLimitFieldsAndRefusals: every answer to an authenticated API
// request tells the client its policy and what remains; past the limit the
// API answers 429 with Retry-After, a rate-limited problem and the fields,
// and the request has no effect; each client has a limit of its own; an
// unauthenticated request is not counted and carries no fields.
func TestRateLimitFieldsAndRefusals(t *testing.T) {
	t.Parallel()
	api := webtest.NewLimitedAPI(t, 3)
	flows := func() int {
		var n int
		if err := api.Pool.QueryRow(context.Background(), "select count(*) from flows").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if resp, _ := api.Call(t, "GET", "/api/flows", "", ""); resp.StatusCode != http.StatusUnauthorized ||
		resp.Header.Get("RateLimit") != "" || resp.Header.Get("RateLimit-Policy") != "" {
		t.Fatalf("without a token: %d, RateLimit %q", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	lastReset := 0
	for want := 2; want >= 0; want-- {
		resp, body := api.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(nil))
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
		if p := resp.Header.Get("RateLimit-Policy"); p != `"default";q=3;w=60` {
			t.Fatalf("RateLimit-Policy %q", p)
		}
		remaining, reset := rateLimitOf(t, resp)
		if remaining != want || reset < 1 || reset > 60 {
			t.Fatalf("RateLimit %q; want r=%d and t from 1 to 60", resp.Header.Get("RateLimit"), want)
		}
		lastReset = reset
	}

	resp, body := api.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(nil))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("past the limit: %d %s", resp.StatusCode, body)
	}
	var p httpkit.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Type != web.ProblemType(api.Srv.Deps.Config.BaseURL.String(), apperr.RateLimited) || p.Status != 429 {
		t.Fatalf("problem %s", body)
	}
	remaining, reset := rateLimitOf(t, resp)
	if remaining != 0 || reset > lastReset || resp.Header.Get("Retry-After") != strconv.Itoa(reset) {
		t.Fatalf("past the limit: RateLimit %q, Retry-After %q", resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"))
	}
	if n := flows(); n != 3 {
		t.Fatalf("%d flows after a refused create, want 3", n)
	}
	if resp, _ := api.Call(t, "GET", "/api/flows", webtest.TokA, ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a read past the limit: %d", resp.StatusCode)
	}

	// Another client has its own count; its errors count and carry the fields too.
	resp, _ = api.Call(t, "GET", "/api/flows/not-a-flow", webtest.TokB, "")
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another client: %d", resp.StatusCode)
	}
	if remaining, _ := rateLimitOf(t, resp); remaining != 2 {
		t.Fatalf("another client: RateLimit %q", resp.Header.Get("RateLimit"))
	}
}

// TestEveryAuthenticatedAPIRouteIsRateLimited walks the router: every
// route under /api that takes a token answers an authenticated request,
// whatever it makes of it, with both rate limit fields.
func TestEveryAuthenticatedAPIRouteIsRateLimited(t *testing.T) {
	t.Parallel()
	api := webtest.NewLimitedAPI(t, 1000)
	public := map[string]bool{"POST /api/receipts/verify": true, "GET /api/openapi.json": true, "OPTIONS /api/openapi.json": true}
	param := regexp.MustCompile(`:[^/]+`)
	checked := 0
	for _, r := range api.Srv.Echo().Routes() {
		if !strings.HasPrefix(r.Path, "/api/") || public[r.Method+" "+r.Path] || strings.HasPrefix(r.Method, "echo_route_any") ||
			r.Method == "PROPFIND" || r.Method == "REPORT" {
			continue
		}
		checked++
		path := param.ReplaceAllString(r.Path, "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21")
		body := ""
		if r.Method == http.MethodPost || r.Method == http.MethodPatch {
			body = "{}"
		}
		resp, got := api.Call(t, r.Method, path, webtest.TokA, body)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusTooManyRequests {
			t.Errorf("%s %s: %d %s", r.Method, r.Path, resp.StatusCode, got)
			continue
		}
		if resp.Header.Get("RateLimit-Policy") != `"default";q=1000;w=60` || !rateLimitField.MatchString(resp.Header.Get("RateLimit")) {
			t.Errorf("%s %s (%d): RateLimit-Policy %q, RateLimit %q", r.Method, r.Path, resp.StatusCode,
				resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"))
		}
	}
	if checked < 20 {
		t.Fatalf("only %d API routes were checked", checked)
	}
}
