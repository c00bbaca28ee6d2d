package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

// TestAPIAnswersByRoute checks what the router answers under /api before any
// token is looked at: a wrong method is 405 with Allow, an unknown path 404,
// and the public document's CORS preflight succeeds; only a route that exists
// for the method asks for a token.
func TestAPIAnswersByRoute(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	const id = "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21"
	tests := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		status  int
		problem apperr.Code // "" when the answer is no problem
		allow   []string    // methods Allow must name
	}{
		{"wrong method on tasks", "DELETE", "/api/tasks", nil, 405, apperr.MethodNotAllowed, []string{"GET"}},
		{"wrong method on a flow", "PUT", "/api/flows/" + id, nil, 405, apperr.MethodNotAllowed, []string{"GET", "DELETE"}},
		{"wrong method on cancel", "GET", "/api/flows/" + id + "/cancel", nil, 405, apperr.MethodNotAllowed, []string{"POST"}},
		{"wrong method on the document", "POST", "/api/openapi.json", nil, 405, apperr.MethodNotAllowed, []string{"GET"}},
		{"unknown path", "GET", "/api/nowhere", nil, 404, apperr.NotFound, nil},
		{"unknown path below a flow", "GET", "/api/flows/" + id + "/nowhere", nil, 404, apperr.NotFound, nil},
		{"the prefix alone", "GET", "/api", nil, 404, apperr.NotFound, nil},
		{"a route without a token", "GET", "/api/flows", nil, 401, apperr.Unauthenticated, nil},
		{"a route with a bad token", "POST", "/api/flows/" + id + "/cancel", map[string]string{"Authorization": "Bearer nonsense"}, 401, apperr.Unauthenticated, nil},
		{"the document", "GET", "/api/openapi.json", map[string]string{"Origin": "https://tools.example"}, 200, "", nil},
		{"the document's preflight", "OPTIONS", "/api/openapi.json", map[string]string{
			"Origin": "https://tools.example", "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "if-none-match"}, 204, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, ts.url+tt.path, nil)
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.method != http.MethodOptions { // a preflight is no operation of the document
				openapitest.Validate(t, req, nil, resp, body)
			}
			if tt.problem != "" {
				var p httpkit.Problem
				if err := json.Unmarshal(body, &p); err != nil || resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("not a problem (%s): %v", resp.Header.Get("Content-Type"), err)
				}
				if p.Type != web.ProblemType(ts.srv.Deps.Config.BaseURL.String(), tt.problem) || p.Status != tt.status {
					t.Fatalf("problem %+v, want type %s", p, web.ProblemType(ts.srv.Deps.Config.BaseURL.String(), tt.problem))
				}
			}
			allow := resp.Header.Get("Allow")
			for _, m := range tt.allow {
				if !strings.Contains(allow, m) {
					t.Errorf("Allow %q lacks %s", allow, m)
				}
			}
		})
	}
}

// TestOnlyThePublicDocumentIsReadableFromOtherOrigins: the OpenAPI document
// is loaded by tools on other sites; the API serves machines, and browsers
// of other origins get no CORS grant for it.
func TestOnlyThePublicDocumentIsReadableFromOtherOrigins(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	preflight := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, ts.url+path, nil)
		req.Header.Set("Origin", "https://tools.example")
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "if-none-match")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := preflight("/api/openapi.json")
	h := resp.Header
	if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "GET") ||
		h.Get("Access-Control-Allow-Headers") != "*" || h.Get("Access-Control-Max-Age") == "" {
		t.Fatalf("preflight of the document: %d %v", resp.StatusCode, h)
	}
	for _, path := range []string{"/api/flows", "/api/tasks"} {
		if resp := preflight(path); resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.StatusCode == 401 {
			t.Errorf("preflight of %s: %d %v", path, resp.StatusCode, resp.Header)
		}
	}
}
