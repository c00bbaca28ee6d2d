// Package openapitest checks, in tests, that flowd's HTTP responses are what
// its OpenAPI document says: the status is documented for the operation, the
// documented headers are present and well-formed, and the body matches the
// schema of its content type. Use Client or Transport for tests that talk to
// a running server, Validate or ValidateRecorder for tests that hold a
// response already, and ValidateWebhook for a received webhook delivery.
//
// Only responses are checked, never requests: tests send bad requests on
// purpose. Security is not checked either; authentication has tests of its own.
// Requests outside /api and /oauth (pages, health, assets) are not checked.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/flowd/flowd/web/openapi"
)

// Client returns an HTTP client whose every response is validated, failing t
// on a mismatch.
func Client(t testing.TB) *http.Client {
	return &http.Client{Transport: Transport(t, nil)}
}

// Transport wraps base (http.DefaultTransport when nil) so that every response
// passing through it is validated against the document, failing t on a
// mismatch. The response body is read and handed back unread to the caller.
func Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{t: t, base: base}
}

type transport struct {
	t    testing.TB
	base http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil && req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			reqBody, _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("openapitest: reading the response body: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	Validate(tr.t, req, reqBody, resp, body)
	return resp, nil
}

// Validate fails t (with Errorf, so it is safe from any goroutine) when resp,
// with body respBody, is not what the document says req's operation answers.
// reqBody is only quoted in the failure message; it may be nil.
func Validate(t testing.TB, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	t.Helper()
	if err := Check(req, resp.StatusCode, resp.Header, respBody); err != nil {
		t.Errorf("%s", failure(req, reqBody, resp.StatusCode, resp.Header, respBody, err))
	}
}

// ValidateRecorder is Validate for a response recorded by httptest.
func ValidateRecorder(t testing.TB, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	if err := Check(req, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		t.Errorf("%s", failure(req, nil, rec.Code, rec.Header(), rec.Body.Bytes(), err))
	}
}

// ValidateWebhook fails t when a webhook delivery (its request headers and
// body, as the receiver got them) is not the document's flowEvent webhook.
func ValidateWebhook(t testing.TB, header http.Header, body []byte) {
	t.Helper()
	if err := CheckWebhook(header, body); err != nil {
		t.Errorf("openapitest: the webhook delivery does not match the OpenAPI document's webhook of its type:\n%v\nbody: %s", err, excerpt(body))
	}
}

// Check returns why a response to req with status, header and body does not
// match the document, or nil when it does or when req is not an API request.
func Check(req *http.Request, status int, header http.Header, body []byte) error {
	s, err := load()
	if err != nil {
		return err
	}
	path := req.URL.Path
	if !strings.HasPrefix(path, "/api/") && path != "/api" && !strings.HasPrefix(path, "/oauth/") {
		return nil
	}
	if req.Method == http.MethodHead {
		return nil
	}
	r := routable(req)
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		if !errors.Is(err, routers.ErrPathNotFound) && !errors.Is(err, routers.ErrMethodNotAllowed) {
			return fmt.Errorf("finding the operation: %w", err)
		}
		// An address the document does not list may answer only with one of
		// the generic problems (401 before authentication, 404, 405, ...).
		response, ok := genericProblem(s.doc, status)
		if !ok {
			return fmt.Errorf("%s %s is not an operation of the document, and %d is not one of its generic problem answers", req.Method, path, status)
		}
		op := openapi3.NewOperation()
		op.Responses = openapi3.NewResponses(openapi3.WithStatus(status, response))
		route = &routers.Route{Spec: s.doc, Path: path, Method: req.Method, Operation: op}
	}
	documented := route.Operation.Responses.Status(status)
	if documented == nil {
		documented = route.Operation.Responses.Default()
	}
	if documented == nil {
		var codes []string
		for code := range route.Operation.Responses.Map() {
			codes = append(codes, code)
		}
		slices.Sort(codes)
		return fmt.Errorf("status %d is not documented for %s %s (%s); documented: %s",
			status, req.Method, route.Path, route.Operation.OperationID, strings.Join(codes, ", "))
	}
	err = validateResponse(r, params, route, status, header, body)
	if err == nil {
		return nil
	}
	// A header problem stops kin-openapi before the body: check the body too,
	// so one run names every problem.
	if strings.Contains(err.Error(), "response header") {
		bodyOnly := *documented.Value
		bodyOnly.Headers = nil
		op := *route.Operation
		op.Responses = openapi3.NewResponses(openapi3.WithStatus(status, &openapi3.ResponseRef{Value: &bodyOnly}))
		rt := *route
		rt.Operation = &op
		if berr := validateResponse(r, params, &rt, status, header, body); berr != nil {
			err = errors.Join(err, berr)
		}
	}
	return err
}

func validateResponse(r *http.Request, params map[string]string, route *routers.Route, status int, header http.Header, body []byte) error {
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  status,
		Header:  header,
		Options: responseOptions,
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// webhookOf names the document's webhook that describes body, by its type:
// an event of a person's (subject.*) or an endpoint's has its own.
func webhookOf(body []byte) string {
	var ev struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &ev)
	switch ev.Type {
	case "endpoint.disabled":
		return "endpointDisabled"
	case "subject.erased":
		return "subjectErased"
	case "subject.erasure_requested":
		return "subjectErasureRequested"
	}
	return "flowEvent"
}

// CheckWebhook returns why a webhook delivery does not match the document's
// flowEvent webhook, or nil.
func CheckWebhook(header http.Header, body []byte) error {
	s, err := load()
	if err != nil {
		return err
	}
	name := webhookOf(body)
	hook := s.doc.Webhooks[name]
	if hook == nil || hook.Post == nil {
		return fmt.Errorf("the document has no %s webhook", name)
	}
	op := hook.Post
	var problems []string
	for _, p := range op.Parameters {
		param := p.Value
		if param.In != openapi3.ParameterInHeader {
			continue
		}
		raw := header.Get(param.Name)
		if raw == "" {
			if param.Required {
				problems = append(problems, fmt.Sprintf("header %s is missing", param.Name))
			}
			continue
		}
		var v any = raw
		if param.Schema.Value.Type.Is(openapi3.TypeInteger) {
			n, err := strconv.ParseInt(raw, 10, 64)
			if err != nil {
				problems = append(problems, fmt.Sprintf("header %s: %q is not an integer", param.Name, raw))
				continue
			}
			v = float64(n)
		}
		if err := param.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			problems = append(problems, fmt.Sprintf("header %s: %v", param.Name, err))
		}
	}
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		problems = append(problems, fmt.Sprintf("Content-Type is %q, want application/json", ct))
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		problems = append(problems, fmt.Sprintf("the body is not JSON: %v", err))
	} else {
		schema := op.RequestBody.Value.Content.Get("application/json").Schema.Value
		if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
			problems = append(problems, fmt.Sprintf("body: %v", err))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// genericProblems are the answers any address under /api or /oauth may give,
// named by their component in the document. A 405 answers a method that no
// operation has, so no operation documents it: it is checked as a problem of
// any type (the web tests check its type).
var genericProblems = map[int]string{
	http.StatusBadRequest:            "Invalid",
	http.StatusUnauthorized:          "Unauthenticated",
	http.StatusForbidden:             "InsufficientScope",
	http.StatusNotFound:              "NotFound",
	http.StatusMethodNotAllowed:      "",
	http.StatusRequestEntityTooLarge: "TooLarge",
	http.StatusUnsupportedMediaType:  "UnsupportedMediaType",
	http.StatusInternalServerError:   "Internal",
	http.StatusServiceUnavailable:    "Unavailable",
}

// genericProblem returns the response an address outside the document's
// operations may answer with status.
func genericProblem(doc *openapi3.T, status int) (*openapi3.ResponseRef, bool) {
	name, ok := genericProblems[status]
	switch {
	case !ok:
		return nil, false
	case name != "":
		return doc.Components.Responses[name], true
	}
	r := openapi3.NewResponse().WithDescription("A problem.")
	r.Headers = openapi3.Headers{"X-Request-Id": doc.Components.Headers["XRequestId"]}
	r.Content = openapi3.Content{"application/problem+json": &openapi3.MediaType{Schema: doc.Components.Schemas["Problem"]}}
	return &openapi3.ResponseRef{Value: r}, true
}

// A consent receipt is served as application/jwt: text, checked against
// its string schema.
func init() { openapi3filter.RegisterBodyDecoder("application/jwt", openapi3filter.PlainBodyDecoder) }

// responseOptions fail on undocumented statuses, report every schema error,
// and name each by its place in the body rather than dumping the schema.
var responseOptions = func() *openapi3filter.Options {
	o := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	o.WithCustomSchemaErrorFunc(func(err *openapi3.SchemaError) string {
		return fmt.Sprintf("at /%s: %s", strings.Join(err.JSONPointer(), "/"), err.Reason)
	})
	return o
}()

type spec struct {
	doc    *openapi3.T
	router routers.Router
}

var (
	loadOnce sync.Once
	loaded   spec
	loadErr  error
)

// load parses the document once for the whole test binary.
func load() (spec, error) {
	loadOnce.Do(func() {
		written, err := openapi.Written()
		if err != nil {
			loadErr = err
			return
		}
		// Tests serve on any host and port: match paths only. The copy
		// leaves the shared document as written.
		doc := *written
		doc.Servers = openapi3.Servers{{URL: "/"}}
		router, err := gorillamux.NewRouter(&doc)
		if err != nil {
			loadErr = fmt.Errorf("openapitest: building the router: %w", err)
			return
		}
		loaded = spec{doc: &doc, router: router}
	})
	return loaded, loadErr
}

// routable returns req with an absolute URL, as the router wants, whether it
// came from a client (absolute already) or from httptest.NewRequest.
func routable(req *http.Request) *http.Request {
	if req.URL.Host != "" {
		return req
	}
	r := req.Clone(context.Background())
	r.URL.Scheme = "http"
	r.URL.Host = req.Host
	if r.URL.Host == "" {
		r.URL.Host = "localhost"
	}
	return r
}

func failure(req *http.Request, reqBody []byte, status int, header http.Header, body []byte, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "openapitest: the response to %s %s does not match the OpenAPI document (web/openapi/openapi.yaml):\n", req.Method, req.URL.RequestURI())
	fmt.Fprintf(&b, "  %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
	if len(reqBody) > 0 {
		fmt.Fprintf(&b, "request body: %s\n", excerpt(reqBody))
	}
	fmt.Fprintf(&b, "response: %d, Content-Type %q\n%s", status, header.Get("Content-Type"), excerpt(body))
	return b.String()
}

func excerpt(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
