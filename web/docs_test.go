package web_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/openapi"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

func TestTheOpenAPIDocumentIsServedPublicly(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	client := openapitest.Client(t) // the answer is itself an operation of the document
	resp, err := client.Get(ts.url + "/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("ETag") == "" {
		t.Fatalf("headers %v", resp.Header)
	}
	doc, err := openapi.LoadData(body)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := doc.Servers[0].URL, ts.srv.Deps.Config.BaseURL.String(); got != want {
		t.Fatalf("servers[0].url %q, want the configured base URL %q", got, want)
	}

	req, _ := http.NewRequest("GET", ts.url+"/api/openapi.json", nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	again, err := client.Do(req) // the 304 is documented too
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified {
		t.Fatalf("a revalidation answered %d, want 304", again.StatusCode)
	}
}

func TestTheDocsPageRendersTheDocument(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	resp, body := do(t, "GET", ts.url+"/docs", "", "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	doc, err := openapi.Written()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`<html lang="en">`, `<h1>flowd API</h1>`, `<main id="content"`, `href="/assets/css/app.css"`,
		`id="authentication"`, `id="errors"`, `id="pagination"`, `id="idempotency"`, `id="webhooks"`,
		`curl -s -X POST http://localhost:8080/oauth/token`, "webhook-signature", "flows:write", "flows:delete",
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			want = append(want, `id="`+op.OperationID+`"`, ">"+method+"<", ">"+path+"<", html.EscapeString(op.Summary))
			for _, p := range op.Parameters {
				want = append(want, "<code>"+p.Value.Name+"</code>")
			}
		}
	}
	for _, code := range allCodes() {
		want = append(want, `id="problem-`+string(code)+`"`, web.ProblemType(ts.srv.Deps.Config.BaseURL.String(), code))
	}
	for _, field := range []string{"nationalId", "redirectUrl", "_links.consent.href", "flow.consent.openedAt",
		"flow.incidents.{key}.taskCategory", "data[].flowNumber", "refresh_expires_in", "data.flowStatus"} {
		want = append(want, "<code>"+field+"</code>")
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	// No script and nothing from another site.
	if strings.Contains(body, "<script") || regexp.MustCompile(`(src|href)="(https?:)?//`).MatchString(strings.ReplaceAll(body, `href="https://www.standardwebhooks.com/"`, "")) {
		t.Fatal("the page loads scripts or third-party assets")
	}
	// Descriptions are escaped Markdown, never raw HTML from the document.
	if strings.Contains(body, "<access_token>") {
		t.Fatal("unescaped text from the document")
	}
}

// allCodes lists every application error code the web layer knows.
func allCodes() []apperr.Code {
	codes := make([]apperr.Code, 0, len(web.ProblemKinds()))
	for code := range web.ProblemKinds() {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	return codes
}

// TestEveryProblemTypeLeadsToItsDocumentation follows each error code's
// problem type, an absolute URI under the configured base URL, to the /docs
// page and reads the section its fragment names: it must document that
// problem, with its type, status and title. A real problem answer carries
// the same URI.
func TestEveryProblemTypeLeadsToItsDocumentation(t *testing.T) {
	t.Parallel()
	const base = "https://consent.bank.example"
	ts := setupWith(t, func(k string) string {
		if k == "FLOWD_BASE_URL" {
			return base
		}
		return ""
	})
	pages := map[string]string{}
	heading := regexp.MustCompile(`<h[1-6][ >]`)
	for _, code := range allCodes() {
		typ := web.ProblemType(base, code)
		u, err := url.Parse(typ)
		if err != nil || !u.IsAbs() || u.Scheme+"://"+u.Host != base || u.Fragment == "" {
			t.Errorf("%s: type %q is not an absolute URI under %s with a fragment", code, typ, base)
			continue
		}
		page, ok := pages[u.Path]
		if !ok {
			resp, body := do(t, "GET", ts.url+u.Path, "", "")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: GET %s answered %d", code, u.Path, resp.StatusCode)
			}
			page, pages[u.Path] = body, body
		}
		at := strings.Index(page, `id="`+u.Fragment+`"`)
		if at < 0 {
			t.Errorf("%s: %s has no element with id %q", code, u.Path, u.Fragment)
			continue
		}
		section := page[at:]
		if next := heading.FindStringIndex(section[1:]); next != nil {
			section = section[:next[0]+1]
		}
		kind := web.ProblemKinds()[code]
		for _, want := range []string{"<code>" + typ + "</code>", fmt.Sprintf("<code>%d</code>", kind.Status), html.EscapeString(kind.Title)} {
			if !strings.Contains(section, want) {
				t.Errorf("%s: the section %q does not document %q:\n%s", code, u.Fragment, want, section)
			}
		}
	}

	resp, body := do(t, "GET", ts.url+"/no-such-page", "", "")
	var p httpkit.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Type != web.ProblemType(base, apperr.NotFound) {
		t.Fatalf("%d %s: want the type %s", resp.StatusCode, body, web.ProblemType(base, apperr.NotFound))
	}
}

// TestTheDocumentListsEveryProblemType: the document's problem schemas
// (ProblemInvalid, ProblemNotFound, …), which each narrow the type to their
// kinds, together accept the type of every error code and nothing else. A 405
// answers a method no operation has, so no schema of an operation holds it;
// TestEveryProblemTypeLeadsToItsDocumentation finds it under Errors.
func TestTheDocumentListsEveryProblemType(t *testing.T) {
	t.Parallel()
	doc, err := openapi.Written()
	if err != nil {
		t.Fatal(err)
	}
	var types []*openapi3.Schema
	for name, s := range doc.Components.Schemas {
		if !strings.HasPrefix(name, "Problem") {
			continue
		}
		for _, part := range s.Value.AllOf {
			if typ := part.Value.Properties["type"]; typ != nil && typ.Value.Pattern != "" {
				types = append(types, typ.Value)
			}
		}
	}
	if len(types) < 10 {
		t.Fatalf("only %d problem schemas narrow the type", len(types))
	}
	accepted := func(code apperr.Code) bool {
		for _, typ := range types {
			if typ.VisitJSON(web.ProblemType(openapi.DefaultBaseURL, code)) == nil {
				return true
			}
		}
		return false
	}
	for _, code := range allCodes() {
		if !accepted(code) && code != apperr.MethodNotAllowed {
			t.Errorf("no problem schema accepts the type of %s", code)
		}
	}
	if accepted("no-such-code") {
		t.Error("a problem schema accepts an unknown code")
	}
}

// TestEveryAPIRouteIsDocumented walks the real router: a route under /api (or
// the token endpoint) that the document does not list is drift.
func TestEveryAPIRouteIsDocumented(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	doc, err := openapi.Written()
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}|:[^/]+`)
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+param.ReplaceAllString(path, "{}")] = true
		}
	}
	checked := 0
	for _, r := range ts.srv.Echo().Routes() {
		oauth := r.Path == "/oauth/token" || r.Path == "/oauth/revoke" || r.Path == "/oauth/introspect"
		if !strings.HasPrefix(r.Path, "/api/") && !oauth || strings.HasSuffix(r.Path, "*") {
			continue
		}
		// OPTIONS answers CORS preflights, which are no operations.
		if strings.HasPrefix(r.Method, "echo_route_any") || r.Method == "PROPFIND" || r.Method == "REPORT" || r.Method == http.MethodOptions {
			continue
		}
		checked++
		if key := r.Method + " " + param.ReplaceAllString(r.Path, "{}"); !documented[key] {
			t.Errorf("%s %s is routed but not in the OpenAPI document", r.Method, r.Path)
		}
	}
	if checked == 0 {
		t.Fatal("no API route was checked")
	}
}

// TestAnswersWithoutATokenMatchTheDocument sends every protected operation
// without a token through the validating client: the real 401s must be what
// the document promises (problem body, WWW-Authenticate, X-Request-Id).
func TestAnswersWithoutATokenMatchTheDocument(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	doc, err := openapi.Written()
	if err != nil {
		t.Fatal(err)
	}
	client := openapitest.Client(t)
	const id = "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21"
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security == nil || len(*op.Security) == 0 || len((*op.Security)[0]) == 0 {
				continue // public
			}
			url := ts.url + strings.ReplaceAll(path, "{flowId}", id)
			if path == "/api/tasks" {
				url += "?flowId=" + id
			}
			req, _ := http.NewRequest(method, url, strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s without a token: %d, want 401", method, path, resp.StatusCode)
			}
		}
	}
}

// TestTheDocsPageTravelsGzipped: the reference page is large, and goes
// gzipped to a client that takes gzip, whole to one that does not.
func TestTheDocsPageTravelsGzipped(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	get := func(acceptEncoding string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, ts.url+"/docs", nil)
		req.Header.Set("Accept-Encoding", acceptEncoding)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, zipped := get("br, gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("Content-Encoding %q, Vary %q", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(zipped) > 300<<10 || len(zipped)*5 > len(page) {
		t.Errorf("the page is %d bytes, %d gzipped: want it under 300 KiB and a fifth of the page", len(page), len(zipped))
	}
	resp, whole := get("gzip;q=0, identity")
	if resp.Header.Get("Content-Encoding") != "" || !bytes.Equal(whole, page) {
		t.Errorf("without gzip: Content-Encoding %q, %d bytes, want the page as it is (%d bytes)",
			resp.Header.Get("Content-Encoding"), len(whole), len(page))
	}
}
