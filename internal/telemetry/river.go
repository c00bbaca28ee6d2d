package telemetry

import (
	"context"
	"encoding/json"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
)

// RiverMiddleware is the middleware of a River client whose jobs a request
// may cause: the request's id, and its trace when tracing is on, go into
// each job's metadata at insert and come back into the context it is
// worked in, so that a job's log lines name the request and its span is a
// child of the request's (one trace from the request to the job's last
// attempt). With tracing on, otelriver adds a span for each insert and for
// each job worked.
func (t *Tracing) RiverMiddleware() []rivertype.Middleware {
	mw := []rivertype.Middleware{&jobContext{tracing: t.Enabled()}}
	if t.Enabled() {
		mw = append(mw, t.riverSpans(false))
	}
	return mw
}

// RiverLinkedMiddleware is the middleware of a River client whose jobs run
// long after the request that scheduled them (an acceptance's expiry, days
// later): with tracing on, otelriver's spans, each job's in a trace of its
// own with a link to the span that inserted it; nothing when off.
func (t *Tracing) RiverLinkedMiddleware() []rivertype.Middleware {
	if !t.Enabled() {
		return nil
	}
	return []rivertype.Middleware{t.riverSpans(true)}
}

func (t *Tracing) riverSpans(link bool) *otelriver.Middleware {
	return otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider: t.provider, MeterProvider: metricnoop.NewMeterProvider(),
		EnableWorkSpanJobKindSuffix: true, EnableTracePropagation: link,
	})
}

// jobContext carries a request's id and trace through a job's metadata.
type jobContext struct {
	river.MiddlewareDefaults
	tracing bool
}

// jobOrigin is what jobContext keeps in a job's metadata.
type jobOrigin struct {
	RequestID   string `json:"request_id,omitempty"`
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// InsertMany implements rivertype.JobInsertMiddleware.
func (j *jobContext) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error),
) ([]*rivertype.JobInsertResult, error) {
	origin := jobOrigin{RequestID: RequestID(ctx)}
	if j.tracing {
		carrier := propagation.MapCarrier{}
		propagator.Inject(ctx, carrier)
		origin.Traceparent, origin.Tracestate = carrier["traceparent"], carrier["tracestate"]
	}
	if origin != (jobOrigin{}) {
		for _, p := range params {
			p.Metadata = withOrigin(p.Metadata, origin)
		}
	}
	return doInner(ctx)
}

// withOrigin returns the JSON object metadata with origin's fields added;
// metadata unchanged when it is not an object.
func withOrigin(metadata []byte, origin jobOrigin) []byte {
	fields := map[string]json.RawMessage{}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &fields); err != nil {
			return metadata
		}
	}
	for key, value := range map[string]string{"request_id": origin.RequestID, "traceparent": origin.Traceparent, "tracestate": origin.Tracestate} {
		if value != "" {
			fields[key], _ = json.Marshal(value)
		}
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return metadata
	}
	return out
}

// Work implements rivertype.WorkerMiddleware.
func (j *jobContext) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if len(job.Metadata) > 2 { // more than "{}"
		var origin jobOrigin
		if json.Unmarshal(job.Metadata, &origin) == nil {
			if origin.RequestID != "" {
				ctx = WithRequestID(ctx, origin.RequestID)
			}
			if j.tracing && origin.Traceparent != "" {
				ctx = propagator.Extract(ctx, propagation.MapCarrier{"traceparent": origin.Traceparent, "tracestate": origin.Tracestate})
			}
		}
	}
	return doInner(ctx)
}
