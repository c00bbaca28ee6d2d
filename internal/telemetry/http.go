package telemetry

import (
	"net/http"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Transport returns base with a client span around each request, named
// name, and the request's trace sent on in a traceparent header; base
// itself when tracing is off. The span records the method, the host and
// the status, never the path or the query: a receiver's URL may carry a
// secret of its own.
func (t *Tracing) Transport(name string, base http.RoundTripper) http.RoundTripper {
	if !t.Enabled() {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &clientTransport{name: name, base: base, tracer: t.Tracer()}
}

// WrapTransport is Transport as a function of base alone, for the modules'
// options.
func (t *Tracing) WrapTransport(name string) func(http.RoundTripper) http.RoundTripper {
	if !t.Enabled() {
		return nil
	}
	return func(base http.RoundTripper) http.RoundTripper { return t.Transport(name, base) }
}

type clientTransport struct {
	name   string
	base   http.RoundTripper
	tracer trace.Tracer
}

func (c *clientTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := c.tracer.Start(r.Context(), c.name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.ServerAddress(r.URL.Hostname()),
			semconv.URLScheme(r.URL.Scheme)))
	defer span.End()
	r = r.Clone(ctx)
	propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := c.base.RoundTrip(r)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeOther)
		return nil, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
}
