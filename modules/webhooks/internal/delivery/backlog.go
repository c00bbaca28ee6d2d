package delivery

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/dbstats"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

var (
	backlogDeliveries = prometheus.NewDesc("flowd_webhook_deliveries",
		"Webhook deliveries not finished, by state: due (to be sent now), retrying (waiting for their next attempt), held (put off because their host was busy), running.",
		[]string{"state"}, nil)
	backlogOldestDue = prometheus.NewDesc("flowd_webhook_oldest_due_delivery_seconds",
		"How long the delivery due the longest has waited since it came due; 0 when none is due.", nil, nil)
	endpointsByHealth = prometheus.NewDesc("flowd_webhook_endpoints",
		"Webhook endpoints by health: failing (deliveries failing, still enabled) and disabled (by flowd, for failing too long).",
		[]string{"state"}, nil)
)

// BacklogCollector reads the delivery backlog and the endpoints' health at
// scrape time (dbstats: a short timeout, the result shared for a while).
func BacklogCollector(pool *pgxpool.Pool, log *slog.Logger) prometheus.Collector {
	return dbstats.New([]*prometheus.Desc{backlogDeliveries, backlogOldestDue, endpointsByHealth},
		func(ctx context.Context) ([]prometheus.Metric, error) {
			b, err := store.ReadBacklog(ctx, pool, Args{}.Kind())
			if err != nil {
				return nil, err
			}
			failing, disabled, err := store.EndpointHealth(ctx, pool)
			if err != nil {
				return nil, err
			}
			out := []prometheus.Metric{
				prometheus.MustNewConstMetric(backlogOldestDue, prometheus.GaugeValue, b.OldestDue.Seconds()),
				prometheus.MustNewConstMetric(endpointsByHealth, prometheus.GaugeValue, float64(failing), "failing"),
				prometheus.MustNewConstMetric(endpointsByHealth, prometheus.GaugeValue, float64(disabled), "disabled"),
			}
			for state, n := range b.Counts {
				out = append(out, prometheus.MustNewConstMetric(backlogDeliveries, prometheus.GaugeValue, float64(n), state))
			}
			return out, nil
		}, dbstats.Options{Name: "the webhook backlog", Log: log})
}
