package ssf

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/dbstats"
	"github.com/flowd/flowd/modules/ssf/internal/store"
)

var (
	streamLag = prometheus.NewDesc("flowd_ssf_stream_lag_seconds",
		"How long the oldest SET a stream holds unacknowledged has waited; 0 when it holds none.",
		[]string{"organization_id", "stream_id"}, nil)
	streamPending = prometheus.NewDesc("flowd_ssf_stream_pending_sets",
		"The SETs a stream holds unacknowledged.", []string{"organization_id", "stream_id"}, nil)
)

// lagCollector reads each stream's lag at scrape time (dbstats: a short
// timeout, the result shared for a while).
func (m *Module) lagCollector() prometheus.Collector {
	return dbstats.New([]*prometheus.Desc{streamLag, streamPending}, func(ctx context.Context) ([]prometheus.Metric, error) {
		lags, err := store.Lags(ctx, m.pool)
		if err != nil {
			return nil, err
		}
		out := make([]prometheus.Metric, 0, 2*len(lags))
		for _, l := range lags {
			out = append(out,
				prometheus.MustNewConstMetric(streamLag, prometheus.GaugeValue, l.Seconds, l.OrganizationID, l.StreamID),
				prometheus.MustNewConstMetric(streamPending, prometheus.GaugeValue, float64(l.Pending), l.OrganizationID, l.StreamID))
		}
		return out, nil
	}, dbstats.Options{Name: "the SSF streams' lag", Log: m.log})
}
