package openapitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/flowd/flowd/web/openapi"
)

// fakeTB records failures instead of failing the test, so the helper's own
// failures can be asserted.
type fakeTB struct {
	testing.TB
	failures []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}

const flowID = "0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21"

func created() map[string]any {
	return map[string]any{
		"_links": map[string]any{
			"self":    map[string]any{"href": "/api/flows/" + flowID},
			"consent": map[string]any{"href": "http://localhost:8080/consent/abc"},
		},
		"flowId":      flowID,
		"referenceId": "BANK-1",
	}
}

func problem(status int, code string) map[string]any {
	return map[string]any{"type": openapi.DefaultBaseURL + "/docs#problem-" + code, "title": "t", "status": status, "detail": "d"}
}

func header(kv ...string) http.Header {
	h := http.Header{"X-Request-Id": {"abc"}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		path   string
		status int
		header http.Header
		body   any
		fail   string // a part of the failure message; "" when the response conforms
	}{
		{"created", "POST", "/api/flows", 201,
			header("Content-Type", "application/json", "Location", "/api/flows/"+flowID), created(), ""},
		{"replayed", "POST", "/api/flows", 201,
			header("Content-Type", "application/json", "Location", "/api/flows/"+flowID, "Idempotent-Replayed", "true"), created(), ""},
		{"missing field", "POST", "/api/flows", 201,
			header("Content-Type", "application/json", "Location", "/api/flows/"+flowID),
			func() map[string]any { m := created(); delete(m, "referenceId"); return m }(), "referenceId"},
		{"wrong type", "POST", "/api/flows", 201,
			header("Content-Type", "application/json", "Location", "/api/flows/"+flowID),
			func() map[string]any { m := created(); m["referenceId"] = 42; return m }(), "referenceId"},
		{"unknown member", "POST", "/api/flows", 201,
			header("Content-Type", "application/json", "Location", "/api/flows/"+flowID),
			func() map[string]any { m := created(); m["nationalId"] = "x"; return m }(), "nationalId"},
		{"missing header", "POST", "/api/flows", 201,
			header("Content-Type", "application/json"), created(), "Location"},
		{"undocumented status", "POST", "/api/flows", 200,
			header("Content-Type", "application/json"), created(), "status"},
		{"wrong content type", "POST", "/api/flows", 400,
			header("Content-Type", "application/json"), problem(400, "invalid"), "Content-Type"},
		{"invalid problem", "POST", "/api/flows", 400,
			header("Content-Type", "application/problem+json"), problem(400, "invalid"), ""},
		{"problem of the wrong type", "POST", "/api/flows", 400,
			header("Content-Type", "application/problem+json"), problem(400, "not-found"), "type"},
		{"problem type under another base URL", "POST", "/api/flows", 400,
			header("Content-Type", "application/problem+json"),
			func() map[string]any {
				m := problem(400, "invalid")
				m["type"] = "https://consent.bank.example/docs#problem-invalid"
				return m
			}(), ""},
		{"relative problem type", "POST", "/api/flows", 400,
			header("Content-Type", "application/problem+json"),
			func() map[string]any { m := problem(400, "invalid"); m["type"] = "/docs#problem-invalid"; return m }(), "type"},
		{"401 with another challenge", "GET", "/api/flows", 401,
			header("Content-Type", "application/problem+json", "WWW-Authenticate", `Basic realm="flowd"`), problem(401, "unauthenticated"), "WWW-Authenticate"},
		{"401 needs WWW-Authenticate", "GET", "/api/flows", 401,
			header("Content-Type", "application/problem+json"), problem(401, "unauthenticated"), "WWW-Authenticate"},
		{"401", "GET", "/api/flows", 401,
			header("Content-Type", "application/problem+json", "WWW-Authenticate", `Bearer realm="flowd", error="invalid_token"`), problem(401, "unauthenticated"), ""},
		{"401 without a token", "GET", "/api/flows", 401,
			header("Content-Type", "application/problem+json", "WWW-Authenticate", `Bearer realm="flowd"`), problem(401, "unauthenticated"), ""},
		{"503 needs Retry-After", "GET", "/api/flows/" + flowID, 503,
			header("Content-Type", "application/problem+json"), problem(503, "unavailable"), "Retry-After"},
		{"timestamp without milliseconds", "GET", "/api/tasks?flowId=" + flowID, 200,
			header("Content-Type", "application/json"),
			map[string]any{"has_more": false, "data": []any{map[string]any{
				"id": flowID, "flowId": flowID, "taskType": "consent", "taskCategory": "user-task", "status": "pending",
				"createdAt": "2026-01-02T03:04:05Z", "updatedAt": "2026-01-02T03:04:05.000Z"}}}, "createdAt"},
		{"delete", "DELETE", "/api/flows/" + flowID, 200,
			header("Content-Type", "application/json"), map[string]any{"status": "deleted", "flowId": flowID, "referenceId": "BANK-1"}, ""},
		{"delete with a wrong status value", "DELETE", "/api/flows/" + flowID, 200,
			header("Content-Type", "application/json"), map[string]any{"status": "gone", "flowId": flowID, "referenceId": "BANK-1"}, "status"},
		{"unknown path, 404 problem", "GET", "/api/nowhere", 404,
			header("Content-Type", "application/problem+json"), problem(404, "not-found"), ""},
		{"unknown path, 200", "GET", "/api/nowhere", 200,
			header("Content-Type", "application/json"), map[string]any{}, "not an operation"},
		{"wrong method, 405 problem", "PUT", "/api/flows/" + flowID, 405,
			header("Content-Type", "application/problem+json"), problem(405, "method-not-allowed"), ""},
		{"not an API path", "GET", "/healthz", 200, header("Content-Type", "text/plain"), "ok", ""},
		{"token", "POST", "/oauth/token", 200,
			header("Content-Type", "application/json", "Cache-Control", "no-store"),
			map[string]any{"access_token": "a.b.c", "expires_in": 300, "refresh_token": "r", "refresh_expires_in": 1800, "token_type": "Bearer", "scope": "flows:read"}, ""},
		{"token without no-store", "POST", "/oauth/token", 200,
			header("Content-Type", "application/json"),
			map[string]any{"access_token": "a.b.c", "expires_in": 300, "refresh_token": "r", "refresh_expires_in": 1800, "token_type": "Bearer", "scope": "flows:read"}, "Cache-Control"},
		{"token error", "POST", "/oauth/token", 400,
			header("Content-Type", "application/json"), map[string]any{"error": "invalid_grant", "error_description": "used"}, ""},
		{"token error as a problem", "POST", "/oauth/token", 400,
			header("Content-Type", "application/problem+json"), problem(400, "invalid"), "Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var body []byte
			if s, ok := tt.body.(string); ok {
				body = []byte(s)
			} else {
				body, _ = json.Marshal(tt.body)
			}
			req := httptest.NewRequest(tt.method, tt.path, nil)
			resp := &http.Response{StatusCode: tt.status, Header: tt.header}
			var f fakeTB
			Validate(&f, req, nil, resp, body)
			switch {
			case tt.fail == "" && len(f.failures) > 0:
				t.Fatalf("a conforming response failed:\n%s", strings.Join(f.failures, "\n"))
			case tt.fail != "" && len(f.failures) == 0:
				t.Fatalf("a non-conforming response passed (want a failure naming %q)", tt.fail)
			case tt.fail != "" && !strings.Contains(f.failures[0], tt.fail):
				t.Fatalf("the failure does not name %q:\n%s", tt.fail, f.failures[0])
			}
		})
	}
}

// TestEveryExampleConforms validates each documented response example, with
// its required headers, as a response of its operation: the examples are
// right, and the validator accepts what the document promises.
func TestEveryExampleConforms(t *testing.T) {
	t.Parallel()
	doc, err := openapi.LoadData(openapi.YAML())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, ref := range op.Responses.Map() {
				status, err := strconv.Atoi(code)
				if err != nil {
					continue
				}
				for mediaType, content := range ref.Value.Content {
					for name, ex := range content.Examples {
						h := http.Header{"Content-Type": {mediaType}}
						for hn, hr := range ref.Value.Headers {
							if hr.Value.Required {
								h.Set(hn, fmt.Sprint(hr.Value.Example))
							}
						}
						body, _ := json.Marshal(ex.Value.Value)
						url := strings.ReplaceAll(path, "{flowId}", flowID)
						if path == "/api/tasks" {
							url += "?flowId=" + flowID
						}
						var f fakeTB
						Validate(&f, httptest.NewRequest(method, url, nil), nil, &http.Response{StatusCode: status, Header: h}, body)
						if len(f.failures) > 0 {
							t.Errorf("%s %s %d %s example %q:\n%s", method, path, status, mediaType, name, strings.Join(f.failures, "\n"))
						}
						n++
					}
				}
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d examples checked", n)
	}
}

func TestTransportValidatesAndKeepsTheBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "abc")
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/flows" {
			_, _ = w.Write([]byte(`{"has_more":false,"data":[]}`))
			return
		}
		_, _ = w.Write([]byte(`{"has_more":"no"}`))
	}))
	defer srv.Close()

	var f fakeTB
	client := &http.Client{Transport: Transport(&f, nil)}
	resp, err := client.Get(srv.URL + "/api/flows?limit=5")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		HasMore bool  `json:"has_more"`
		Data    []any `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Data == nil {
		t.Fatalf("the body was not handed back: %v %+v", err, got)
	}
	resp.Body.Close()
	if len(f.failures) > 0 {
		t.Fatalf("a conforming list failed: %s", f.failures)
	}

	resp, err = client.Get(srv.URL + "/api/tasks?flowId=" + flowID)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(f.failures) != 1 || !strings.Contains(f.failures[0], "has_more") {
		t.Fatalf("a bad task list was not reported: %q", f.failures)
	}
}

func TestValidateRecorder(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "abc")
	rec.Header().Set("Content-Type", "application/problem+json")
	rec.WriteHeader(404)
	_, _ = rec.WriteString(`{"type":"https://flowd.example/docs#problem-not-found","title":"Not found","status":404}`)
	var f fakeTB
	ValidateRecorder(&f, httptest.NewRequest("GET", "/api/flows/"+flowID, nil), rec)
	if len(f.failures) > 0 {
		t.Fatalf("a conforming 404 failed: %s", f.failures)
	}
	ValidateRecorder(&f, httptest.NewRequest("GET", "/api/tasks?flowId="+flowID, nil), rec)
	if len(f.failures) > 0 {
		t.Fatalf("a conforming 404 failed: %s", f.failures)
	}
	ValidateRecorder(&f, httptest.NewRequest("POST", "/api/flows", nil), rec)
	if len(f.failures) != 1 {
		t.Fatalf("create does not answer 404, yet it passed: %q", f.failures)
	}
}

func TestValidateWebhook(t *testing.T) {
	t.Parallel()
	good := http.Header{
		"Content-Type":      {"application/json"},
		"Webhook-Id":        {"2c5d7e9f-1a3b-4c5d-8e7f-9a0b1c2d3e4f"},
		"Webhook-Timestamp": {"1767323046"},
		"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,bm90IGEgcmVhbCBzaWduYXR1cmU="},
	}
	body := `{"type":"flow.accepted","timestamp":"2026-01-02T03:04:05.678Z","data":{"flowId":"` + flowID +
		`","referenceId":"BANK-1","organizationId":"org","status":"Accepted","flowStatus":"completed","version":3}}`
	tests := []struct {
		name   string
		header func(http.Header)
		body   string
		fail   string
	}{
		{"good", func(http.Header) {}, body, ""},
		{"no signature", func(h http.Header) { h.Del("Webhook-Signature") }, body, "webhook-signature"},
		{"bad signature", func(h http.Header) { h.Set("Webhook-Signature", "sha256=abc") }, body, "webhook-signature"},
		{"timestamp not seconds", func(h http.Header) { h.Set("Webhook-Timestamp", "2026-01-02") }, body, "webhook-timestamp"},
		{"personal data", func(http.Header) {}, strings.Replace(body, `"version":3`, `"version":3,"nationalId":"1"`, 1), "nationalId"},
		{"unknown event", func(http.Header) {}, strings.Replace(body, "flow.accepted", "flow.updated", 1), "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := good.Clone()
			tt.header(h)
			var f fakeTB
			ValidateWebhook(&f, h, []byte(tt.body))
			switch {
			case tt.fail == "" && len(f.failures) > 0:
				t.Fatalf("a conforming delivery failed: %s", f.failures)
			case tt.fail != "" && (len(f.failures) == 0 || !strings.Contains(f.failures[0], tt.fail)):
				t.Fatalf("want a failure naming %q, got %q", tt.fail, f.failures)
			}
		})
	}
}

func TestTheDocumentIsOpenAPI31(t *testing.T) {
	t.Parallel()
	s, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if !s.doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q", s.doc.OpenAPI)
	}
	if s.doc.Components.Responses["NotFound"] == nil {
		t.Fatal("no NotFound response component")
	}
	var _ *openapi3.T = s.doc
}
