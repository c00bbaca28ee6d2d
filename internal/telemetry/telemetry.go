// Package telemetry is flowd's tracing: an OpenTelemetry tracer provider
// that exports over OTLP/HTTP when the standard OTEL_* variables ask for it
// and is off otherwise, and what carries a request's trace and id into the
// work it causes (log lines, River jobs, outgoing HTTP requests). Off, every
// part of it costs a nil check.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// instrumentation names the tracer of flowd's own spans.
const instrumentation = "github.com/flowd/flowd"

// Tracing is flowd's tracer provider. The zero value and nil are tracing
// off: nothing is recorded, propagated or exported.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// propagator reads and writes W3C Trace Context (traceparent, tracestate)
// only: baggage a caller sends is not passed on to webhook receivers.
var propagator = propagation.TraceContext{}

// Setup builds the tracing getenv asks for. Tracing is on when
// OTEL_TRACES_EXPORTER is "otlp", or when it is unset and an OTLP endpoint
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT) is
// set; OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off.
// The exporter speaks OTLP over HTTP with protobuf. The SDK reads the other
// OTEL_* variables itself: the sampler (OTEL_TRACES_SAMPLER, default
// parentbased_always_on), the batching (OTEL_BSP_*), the exporter's
// headers, timeout, compression and certificates, the service name and
// resource attributes. version names the build in service.version; the
// exporter's failures (a collector that is down) go to log as warnings.
func Setup(ctx context.Context, getenv func(string) string, version string, log *slog.Logger) (*Tracing, error) {
	if !on(getenv) {
		return nil, nil
	}
	if err := checkSettings(getenv); err != nil {
		return nil, err
	}
	var opts []otlptracehttp.Option
	if endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
	} else if endpoint := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+"/v1/traces"))
	}
	// The SDK reports what it could not do (mostly exports that failed)
	// through one handler for the whole process.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: spans not exported", "error", err.Error())
	}))
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
	}
	// Later sources win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the defaults named here.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(semconv.ServiceName("flowd"), semconv.ServiceVersion(version)), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))}, nil
}

// on reports whether getenv turns tracing on.
func on(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) {
	case "":
		return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	case "none":
		return false
	}
	return true
}

// checkSettings refuses the exporters and protocols flowd does not build
// in, rather than leave an operator wondering why no trace arrives.
func checkSettings(getenv func(string) string) error {
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" && e != "otlp" {
		return fmt.Errorf("OTEL_TRACES_EXPORTER: flowd exports traces with otlp (or none), not %q", e)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(name); p != "" {
			if p != "http/protobuf" {
				return fmt.Errorf("%s: flowd exports over http/protobuf, not %q", name, p)
			}
			break
		}
	}
	return nil
}

// Enabled reports whether tracing is on.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// Shutdown exports the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Provider is the tracer provider: a no-op one when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if !t.Enabled() {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Tracer is the tracer of flowd's own spans.
func (t *Tracing) Tracer() trace.Tracer { return t.Provider().Tracer(instrumentation) }

// Extract returns ctx with the remote span context of the W3C Trace
// Context headers in h, if any.
func (t *Tracing) Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// QueryTracer traces the statements of a pgx pool run inside a recorded
// span, with their SQL and never their arguments (they may hold personal
// data); nil when tracing is off. Acquiring a connection has no span of
// its own: a busy pool shows as a gap before the statement.
func (t *Tracing) QueryTracer() pgx.QueryTracer {
	if !t.Enabled() {
		return nil
	}
	return otelpgx.NewTracer(otelpgx.WithTracerProvider(t.provider), otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelpgx.WithDisableAcquireTracer())
}
