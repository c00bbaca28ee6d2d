package delivery

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// metrics counts deliveries by outcome and times them.
type metrics struct {
	deliveries *prometheus.CounterVec
	latency    prometheus.Histogram
	held       prometheus.Counter
	inOrder    prometheus.Counter
	throttled  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowd_webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome: delivered, failing (will retry), gone (410), exhausted.",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flowd_webhook_delivery_duration_seconds",
			Help:    "Time from sending a webhook to its response or failure.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_webhook_deliveries_held_total",
			Help: "Webhook deliveries held back (snoozed, not attempted) because their host had too many in flight or did not answer in time.",
		}),
		inOrder: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_webhook_deliveries_held_in_order_total",
			Help: "Webhook deliveries to endpoints with per-flow ordering held (not attempted) until an earlier event of their flow was delivered or failed for good.",
		}),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowd_webhook_deliveries_throttled_total",
			Help: "Webhook deliveries put off (not attempted) until their endpoint's rate limit allowed them.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.latency, m.held, m.inOrder, m.throttled)
	}
	return m
}

var outcomeNames = map[outcome]string{delivered: "delivered", failing: "failing", gone: "gone", exhausted: "exhausted"}

// A delivery that ctx shows was traced and sampled is the latency's
// exemplar, so that a slow bucket leads to a trace.
func (m *metrics) observe(ctx context.Context, o outcome, latency time.Duration) {
	m.deliveries.WithLabelValues(outcomeNames[o]).Inc()
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := m.latency.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(latency.Seconds(), prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	m.latency.Observe(latency.Seconds())
}
