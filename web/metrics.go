package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowd/flowd/internal/version"
)

// metrics holds the server's Prometheus instruments, registered on a registry
// of its own so that several servers can live in one test process.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	handler  http.Handler
}

func newMetrics(reg *prometheus.Registry, pool *pgxpool.Pool) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowd_http_requests_total", Help: "HTTP requests by method, route and status.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flowd_http_request_duration_seconds", Help: "HTTP request latency by method, route and status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route", "status"}),
	}
	reg.MustRegister(m.requests, m.latency, PoolCollector("api", pool), buildInfo(), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true})
	return m
}

// observe counts one request. route must be a route pattern or "unmatched",
// never a raw path: each label value makes series that live until restart.
// A request that ctx shows was traced and sampled is the latency's
// exemplar, so that a slow bucket leads to a trace.
func (m *metrics) observe(ctx context.Context, method, route string, status int, elapsed time.Duration) {
	method, code := methodLabel(method), strconv.Itoa(status)
	m.requests.WithLabelValues(method, route, code).Inc()
	latency := m.latency.WithLabelValues(method, route, code)
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		latency.(prometheus.ExemplarObserver).ObserveWithExemplar(elapsed.Seconds(), prometheus.Labels{"trace_id": sc.TraceID().String()})
		return
	}
	latency.Observe(elapsed.Seconds())
}

// methodLabel is a request's method as a label value. Any client can send a
// method of its own invention, and each would make series of its own that
// live until restart, so every method HTTP does not define counts as OTHER.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "OTHER"
}

// buildInfo is the gauge, always 1, whose labels say which build runs, so
// that a dashboard can show a rollout and join it to other series.
func buildInfo() prometheus.Gauge {
	v := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flowd_build_info", Help: "Always 1: the version, commit and Go version of the running build.",
		ConstLabels: prometheus.Labels{"version": v.Version, "commit": v.Commit, "goversion": v.GoVersion},
	})
	g.Set(1)
	return g
}

// PoolCollector reports a database pool's statistics at scrape time, and
// whether the database answers a ping within dbUpTimeout, labelled with
// the pool's name (flowd serve has "api" and "webhooks").
func PoolCollector(name string, pool *pgxpool.Pool) prometheus.Collector {
	return prometheus.WrapCollectorWith(prometheus.Labels{"pool": name}, poolCollector{pool})
}

// poolCollector is PoolCollector without the pool's name.
type poolCollector struct{ pool *pgxpool.Pool }

var (
	poolAcquired   = prometheus.NewDesc("flowd_db_pool_acquired_conns", "Connections in use.", nil, nil)
	poolIdle       = prometheus.NewDesc("flowd_db_pool_idle_conns", "Idle connections.", nil, nil)
	poolTotal      = prometheus.NewDesc("flowd_db_pool_total_conns", "Open connections.", nil, nil)
	poolMax        = prometheus.NewDesc("flowd_db_pool_max_conns", "Most connections the pool opens.", nil, nil)
	poolAcquires   = prometheus.NewDesc("flowd_db_pool_acquires_total", "Connections acquired.", nil, nil)
	poolEmptyWaits = prometheus.NewDesc("flowd_db_pool_empty_acquires_total", "Acquires that waited for a connection.", nil, nil)
	poolWait       = prometheus.NewDesc("flowd_db_pool_acquire_seconds_total", "Time spent acquiring connections.", nil, nil)
	dbUp           = prometheus.NewDesc("flowd_db_up", "1 when the database answered a ping at scrape time, else 0.", nil, nil)
)

// dbUpTimeout bounds the ping of a scrape: a database slower than that
// to answer a ping is as good as down for requests.
const dbUpTimeout = 2 * time.Second

func (p poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolAcquired, poolIdle, poolTotal, poolMax, poolAcquires, poolEmptyWaits, poolWait, dbUp} {
		ch <- d
	}
}

func (p poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := p.pool.Stat()
	ch <- prometheus.MustNewConstMetric(poolAcquired, prometheus.GaugeValue, float64(st.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(poolIdle, prometheus.GaugeValue, float64(st.IdleConns()))
	ch <- prometheus.MustNewConstMetric(poolTotal, prometheus.GaugeValue, float64(st.TotalConns()))
	ch <- prometheus.MustNewConstMetric(poolMax, prometheus.GaugeValue, float64(st.MaxConns()))
	ch <- prometheus.MustNewConstMetric(poolAcquires, prometheus.CounterValue, float64(st.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolEmptyWaits, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolWait, prometheus.CounterValue, st.AcquireDuration().Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), dbUpTimeout)
	defer cancel()
	up := 0.0
	if p.pool.Ping(ctx) == nil {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(dbUp, prometheus.GaugeValue, up)
}
