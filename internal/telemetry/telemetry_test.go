package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestTracingIsOffUnlessConfigured(t *testing.T) {
	for _, c := range []struct {
		name string
		env  func(string) string
		on   bool
	}{
		{"nothing set", env(), false},
		{"a service name alone", env("OTEL_SERVICE_NAME", "flowd-eu"), false},
		{"an endpoint", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"), true},
		{"a traces endpoint", env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/v1/traces"), true},
		{"the otlp exporter named", env("OTEL_TRACES_EXPORTER", "otlp"), true},
		{"the exporter none", env("OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"), false},
		{"the SDK disabled", env("OTEL_SDK_DISABLED", "true", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := Setup(context.Background(), c.env, "test", slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tr.Shutdown(context.Background()) }()
			if tr.Enabled() != c.on {
				t.Errorf("Enabled() = %v, want %v", tr.Enabled(), c.on)
			}
			if !c.on && (tr.QueryTracer() != nil || tr.WrapTransport("x") != nil || len(tr.RiverMiddleware()) != 1 ||
				tr.RiverLinkedMiddleware() != nil) {
				t.Error("tracing off still installs a tracer, a transport or otelriver")
			}
		})
	}
}

func TestSetupRefusesWhatItCannotExport(t *testing.T) {
	for _, c := range []struct {
		env  func(string) string
		name string
	}{
		{env("OTEL_TRACES_EXPORTER", "zipkin"), "OTEL_TRACES_EXPORTER"},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), "OTEL_EXPORTER_OTLP_PROTOCOL"},
	} {
		if _, err := Setup(context.Background(), c.env, "test", slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("Setup: %v, want an error naming %s", err, c.name)
		}
	}
}

func TestLogHandlerAddsTheRequestAndTraceOfTheContext(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("module", "webhooks")
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(WithRequestID(context.Background(), "req-1"),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID}))

	log.InfoContext(ctx, "with")
	log.InfoContext(context.Background(), "without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var with, without map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &with)
	_ = json.Unmarshal([]byte(lines[1]), &without)
	if with["request_id"] != "req-1" || with["trace_id"] != traceID.String() || with["module"] != "webhooks" {
		t.Errorf("logged with a request's context: %s", lines[0])
	}
	if _, ok := without["request_id"]; ok {
		t.Errorf("logged without one: %s", lines[1])
	}
	if _, ok := without["trace_id"]; ok {
		t.Errorf("logged without one: %s", lines[1])
	}
}

func TestJobMetadataKeepsItsOwnFields(t *testing.T) {
	got := withOrigin([]byte(`{"river:x":1}`), jobOrigin{RequestID: "req-1", Traceparent: "00-a-b-01"})
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil || m["river:x"] != float64(1) || m["request_id"] != "req-1" ||
		m["traceparent"] != "00-a-b-01" || len(m) != 3 {
		t.Errorf("withOrigin: %s (%v)", got, err)
	}
	if got := withOrigin([]byte(`[1]`), jobOrigin{RequestID: "req-1"}); string(got) != `[1]` {
		t.Errorf("withOrigin changed metadata that is not an object: %s", got)
	}
}

// TestTransportRecordsNoPathOrQuery: the client span of a request records
// its host and status; the traceparent sent names that span; the URL's
// path and query, which may hold a receiver's secret, are nowhere.
func TestTransportRecordsNoPathOrQuery(t *testing.T) {
	var sent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent = r.Header.Get("traceparent")
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tr := &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/s3cr3t?token=s3cr3t", nil)
	resp, err := (&http.Client{Transport: tr.Transport("webhook delivery", nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "webhook delivery" || spans[0].SpanKind() != trace.SpanKindClient {
		t.Fatalf("spans %v", spans)
	}
	if want := "00-" + spans[0].SpanContext().TraceID().String() + "-" + spans[0].SpanContext().SpanID().String() + "-01"; sent != want {
		t.Errorf("traceparent sent %q, want %q", sent, want)
	}
	status := false
	for _, a := range spans[0].Attributes() {
		if strings.Contains(a.Value.String(), "s3cr3t") {
			t.Errorf("the span records %s = %s", a.Key, a.Value.String())
		}
		status = status || a.Key == "http.response.status_code" && a.Value.AsInt64() == http.StatusAccepted
	}
	if !status {
		t.Errorf("the span has no status 202: %v", spans[0].Attributes())
	}
}
