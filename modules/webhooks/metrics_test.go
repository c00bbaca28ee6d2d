package webhooks_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/webhooks"
)

// TestBacklogMetrics stores deliveries in each state their jobs can be in,
// with no worker running, and scrapes the module's registry over HTTP: each
// state is counted, and the oldest due delivery's wait is measured from
// when it came due.
func TestBacklogMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := newBundle(t, dbtest.New(t), func(o *webhooks.Options) { o.Registry = reg })
	ctx := context.Background()
	for _, flow := range []string{"due-old", "due-new", "retrying", "held", "running"} {
		publish(t, b.pool, b.hooks, b.event(webhooks.FlowCreated, flow, "http://127.0.0.1:1/hooks"))
	}
	// River's jobs as the workers and the retry policy would leave them.
	for flow, update := range map[string]string{
		"due-old":  `scheduled_at = now() - interval '90 seconds'`,
		"retrying": `state = 'retryable', scheduled_at = now() + interval '1 hour', attempt = 1`,
		"held":     `state = 'scheduled', scheduled_at = now() + interval '1 minute'`,
		"running":  `state = 'running', attempted_at = now(), attempt = 1`,
	} {
		if _, err := b.pool.Exec(ctx, `update river_job set `+update+`
			where id = (select job_id from webhook_events where flow_id = $1)`, flow); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.pool.Exec(ctx, `insert into webhook_endpoints (organization_id, id, url, failing_since)
		values ($1, gen_random_uuid(), 'https://a.example/hooks', now()),
		       ($1, gen_random_uuid(), 'https://b.example/hooks', null)`, b.org); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `insert into webhook_endpoints (organization_id, id, url, enabled, disabled_reason)
		values ($1, gen_random_uuid(), 'https://c.example/hooks', false, 'failing'),
		       ($1, gen_random_uuid(), 'https://d.example/hooks', false, null)`, b.org); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(raw)
	value := func(series string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Errorf("no %s", series)
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	for series, want := range map[string]float64{
		`flowd_webhook_deliveries{state="due"}`:      2,
		`flowd_webhook_deliveries{state="retrying"}`: 1,
		`flowd_webhook_deliveries{state="held"}`:     1,
		`flowd_webhook_deliveries{state="running"}`:  1,
		`flowd_webhook_endpoints{state="failing"}`:   1,
		`flowd_webhook_endpoints{state="disabled"}`:  1,
	} {
		if got := value(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// Measured by the database's clock from the backdated job: at least
	// the 90 seconds, and not the age of a job just made due.
	if got := value(`flowd_webhook_oldest_due_delivery_seconds`); got < 90 || got > 3600 {
		t.Errorf("flowd_webhook_oldest_due_delivery_seconds = %v, want about 90", got)
	}
	if t.Failed() {
		t.Logf("scraped:\n%s", body)
	}
}
