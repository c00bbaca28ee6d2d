package e2e

import (
	"bufio"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it keeps every span that
// flowd exports.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	srv   *httptest.Server
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP export to %s as %q", req.URL.Path, req.Header.Get("Content-Type"))
			w.WriteHeader(http.StatusNotFound)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				t.Errorf("OTLP export: %v", err)
				return
			}
			body = gz
		}
		raw, _ := io.ReadAll(body)
		var export coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &export); err != nil {
			t.Errorf("OTLP export: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.spans = append(r.spans, ss.GetSpans()...)
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// trace returns the spans of the trace traceID, by name.
func (r *otlpReceiver) trace(traceID string) map[string][]*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	byName := map[string][]*tracepb.Span{}
	for _, s := range r.spans {
		if hex.EncodeToString(s.GetTraceId()) == traceID {
			byName[s.GetName()] = append(byName[s.GetName()], s)
		}
	}
	return byName
}

// headerReceiver is a webhook receiver that keeps the traceparent each
// delivery came with, by event type.
type headerReceiver struct {
	mu          sync.Mutex
	traceparent map[string]string
	srv         *httptest.Server
}

func newHeaderReceiver(t *testing.T) *headerReceiver {
	r := &headerReceiver{traceparent: map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var ev struct{ Type string }
		_ = json.NewDecoder(req.Body).Decode(&ev)
		r.mu.Lock()
		r.traceparent[ev.Type] = req.Header.Get("traceparent")
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// waitFor waits for an event of type typ and returns its traceparent.
func (r *headerReceiver) waitFor(t *testing.T, typ string) string {
	t.Helper()
	var got string
	testwait.For(t, "a "+typ+" webhook", func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		tp, ok := r.traceparent[typ]
		got = tp
		return ok, "deliveries " + strings.Join(keysOf(r.traceparent), ", ")
	})
	return got
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// createTraced creates a flow whose events go to hooks, in the trace of
// the caller's span parentSpan (a traceparent the request carries); it
// returns the request id flowd answered with.
func createTraced(t *testing.T, in *flowdtest.Instance, api *http.Client, hooks string, traceparent string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, in.URL+"/api/flows", strings.NewReader(
		`{"nationalId":"12345678901","lastName":"Nordmann","redirectUrl":"https://bank.example/done","webhookUrl":"`+hooks+`/hooks"}`))
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := api.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	return resp.Header.Get("X-Request-Id")
}

// logLine returns the first of logs' JSON lines whose msg is msg and
// which has each of the attributes of kv, given as key and value in turn.
func logLine(t *testing.T, logs, msg string, kv ...string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["msg"] != msg {
			continue
		}
		found := true
		for i := 0; i+1 < len(kv); i += 2 {
			found = found && line[kv[i]] == kv[i+1]
		}
		if found {
			return line
		}
	}
	t.Fatalf("no log line %q in:\n%s", msg, logs)
	return nil
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// TestOneTraceFromCreateToDelivery: with an OTLP endpoint set, a create
// that carries a traceparent is one trace, exported over OTLP/HTTP, from
// the caller's span through the server span, its statements (their SQL,
// never their arguments), the River job that delivers flow.created and the
// delivery's client span, whose traceparent the receiver gets; and the log
// lines of the delivery, written inside the webhooks module, name the trace
// and the create's request.
func TestOneTraceFromCreateToDelivery(t *testing.T) {
	t.Parallel()
	collector := newOTLPReceiver(t)
	in := flowdtest.Start(t, flowdtest.WithEnv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.srv.URL))
	_, api := createOrgAndClient(t, in, "Traced Bank", "TRC")
	hooks := newHeaderReceiver(t)

	requestID := createTraced(t, in, api, hooks.srv.URL, "00-"+callerTrace+"-"+callerSpan+"-01")
	traceparent := hooks.waitFor(t, "flow.created")
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || parts[1] != callerTrace {
		t.Fatalf("the receiver got traceparent %q, want one in trace %s", traceparent, callerTrace)
	}
	// The latency histograms name the trace as an exemplar, in the
	// OpenMetrics format Prometheus asks for.
	req, _ := http.NewRequest(http.MethodGet, in.URL+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, histogram := range []string{`flowd_http_request_duration_seconds_bucket{method="POST",route="/api/flows"`,
		"flowd_webhook_delivery_duration_seconds_bucket"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(histogram) + `.* # \{trace_id="` + callerTrace + `"\}`).Match(metrics) {
			t.Errorf("no bucket of %s} has the exemplar trace_id=%s:\n%s", histogram, callerTrace, metrics)
		}
	}
	in.Stop(t) // exports the spans still buffered

	spans := collector.trace(callerTrace)
	names := make([]string, 0, len(spans))
	for name := range spans {
		names = append(names, name)
	}
	one := func(name string, kind tracepb.Span_SpanKind) *tracepb.Span {
		t.Helper()
		if len(spans[name]) == 0 || spans[name][0].GetKind() != kind {
			t.Fatalf("no %s span %q in the trace; it has %v", kind, name, names)
		}
		return spans[name][0]
	}
	server := one("POST /api/flows", tracepb.Span_SPAN_KIND_SERVER)
	if hex.EncodeToString(server.GetParentSpanId()) != callerSpan {
		t.Errorf("the server span's parent is %x, want the caller's %s", server.GetParentSpanId(), callerSpan)
	}
	job := one("river.work/flowd.webhook_delivery", tracepb.Span_SPAN_KIND_CONSUMER)
	delivery := one("webhook delivery", tracepb.Span_SPAN_KIND_CLIENT)
	if parts[2] != hex.EncodeToString(delivery.GetSpanId()) {
		t.Errorf("the receiver's traceparent %q names span %s, not the delivery's %x", traceparent, parts[2], delivery.GetSpanId())
	}
	if string(delivery.GetParentSpanId()) != string(job.GetSpanId()) {
		t.Errorf("the delivery span's parent is %x, not the job's %x", delivery.GetParentSpanId(), job.GetSpanId())
	}

	statements := 0
	for _, ss := range spans {
		for _, s := range ss {
			for _, a := range s.GetAttributes() {
				value := a.GetValue().String()
				if strings.Contains(a.GetKey(), "param") || strings.Contains(value, "12345678901") || strings.Contains(value, "Nordmann") {
					t.Errorf("span %q records %s = %s: an argument", s.GetName(), a.GetKey(), value)
				}
				if a.GetKey() == "db.query.text" && string(s.GetParentSpanId()) == string(server.GetSpanId()) {
					statements++
				}
			}
		}
	}
	if statements == 0 {
		t.Errorf("no database span under the server span; the trace has %v", names)
	}

	delivered := logLine(t, in.Logs.String(), "webhook delivered")
	if delivered["trace_id"] != callerTrace || delivered["request_id"] != requestID {
		t.Errorf("the delivery's log line names trace %v and request %v, want %s and %s", delivered["trace_id"], delivered["request_id"], callerTrace, requestID)
	}
}

// TestUntracedDeliveriesStillNameTheirRequest: with tracing off, nothing
// is propagated (no traceparent to receivers, even for a request that sent
// one) and log lines carry no trace id, but the request's own log line, the
// delivery's, and a token refusal's written inside the identity module
// still name the request that caused them.
func TestUntracedDeliveriesStillNameTheirRequest(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	_, api := createOrgAndClient(t, in, "Untraced Bank", "UNT")
	hooks := newHeaderReceiver(t)

	requestID := createTraced(t, in, api, hooks.srv.URL, "00-"+callerTrace+"-"+callerSpan+"-01")
	if tp := hooks.waitFor(t, "flow.created"); tp != "" {
		t.Errorf("tracing off, the receiver got traceparent %q", tp)
	}
	req, _ := http.NewRequest(http.MethodGet, in.URL+"/api/flows", nil)
	// A token in flowd's name whose signature does not verify.
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","typ":"at+jwt"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+in.URL+`"}`)) + ".c2lnbmF0dXJl"
	req.Header.Set("Authorization", "Bearer "+forged)
	req.Header.Set("X-Request-Id", "refused-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	in.Stop(t)

	logs := in.Logs.String()
	logLine(t, logs, "request", "route", "/api/flows", "method", "POST", "request_id", requestID)
	logLine(t, logs, "identity: access token refused", "request_id", "refused-1")
	delivered := logLine(t, logs, "webhook delivered")
	if delivered["request_id"] != requestID || delivered["trace_id"] != nil {
		t.Errorf("the delivery's log line: %v; want request_id %s and no trace_id", delivered, requestID)
	}
}
