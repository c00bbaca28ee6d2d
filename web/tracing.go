package web

import (
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// traceRequests gives every request a server span, the child of the
// caller's span when the request carries a traceparent. The span is named
// after the route pattern and records the method, the route and the
// status, never the path or the query: paths may hold consent tokens.
// Installed only when tracing is on.
func (s *Server) traceRequests(next echo.HandlerFunc) echo.HandlerFunc {
	tracer := s.tracing.Tracer()
	return func(c echo.Context) error {
		r := c.Request()
		route := c.Path() // echo routes before it runs the middleware of Use
		name := r.Method
		if route != "" {
			name += " " + route
		}
		ctx, span := tracer.Start(s.tracing.Extract(r.Context(), r.Header), name, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(methodLabel(r.Method)), semconv.HTTPRoute(route),
				semconv.URLScheme(s.cfg.BaseURL.Scheme)))
		defer span.End()
		c.SetRequest(r.WithContext(ctx))
		err := next(c)
		if err != nil {
			c.Error(err) // write the response now so its status is known
		}
		status := c.Response().Status
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
		return nil
	}
}
