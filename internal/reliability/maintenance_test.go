package reliability_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestInstancesRunMaintenanceOnce runs two, then three flowd processes on
// one database, each running flows maintenance every 100 ms. The consent
// links of flows created through each in turn expire at one moment: every
// instance sweeps for them, yet each flow is cancelled once and its
// flow.cancelled webhook arrives once, and the expired idempotency keys
// go without a warning. River's periodic jobs (the webhook cleanup and the
// consent expiry sweep) are enqueued by the leader of their schema alone:
// one job each, not one per instance.
func TestInstancesRunMaintenanceOnce(t *testing.T) {
	t.Parallel()
	for _, instances := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d instances", instances), func(t *testing.T) { maintainOnce(t, instances) })
	}
}

func maintainOnce(t *testing.T, instances int) {
	dbURL := dbtest.NewURL(t)
	ps := startInstances(t, dbURL, instances, map[string]string{"FLOWD_MAINTENANCE_INTERVAL": "100ms"})
	first := ps[0]
	tn := newTenant(t, first.Env, "Sweeping Bank", "SWEEP")
	rcv := newReceiver(t, tn.WebhookSecret)
	tok := tn.token(t, first.URL)
	pool := openPool(t, dbURL)

	n := 12
	if long() {
		n = 60
	}
	next := roundRobin(ps)
	ids := make([]string, n)
	for i := range ids {
		a := mustDo(t, "POST", next()+"/api/flows", tok, createBody(fmt.Sprintf("SWEEP%d", i), "Lund", rcv.URL()),
			"Idempotency-Key", fmt.Sprintf("sweep-%d", i))
		if a.Status != 201 {
			t.Fatalf("create: %d %s", a.Status, a.Body)
		}
		var c struct{ FlowID string }
		a.json(t, &c)
		ids[i] = c.FlowID
	}

	// The consent links and the idempotency keys expire, all at once.
	ctx := context.Background()
	for _, sql := range []string{
		`update flows set expires_at = now() - interval '1 second' where organization_id = $1`,
		`update api_idempotency_keys set expires_at = now() - interval '1 second' where organization_id = $1`,
	} {
		if _, err := pool.Exec(ctx, sql, tn.OrgID); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every flow cancelled and every idempotency key purged", func() bool {
		return count(t, pool, `select count(*) from flows where organization_id = $1 and process_status = 'cancelled'`, tn.OrgID) == n &&
			count(t, pool, `select count(*) from api_idempotency_keys where organization_id = $1`, tn.OrgID) == 0
	})
	checkDelivered(t, pool, rcv)
	cancelled := map[string]int{}
	for _, d := range rcv.deliveries() {
		if d.Type == "flow.cancelled" {
			cancelled[d.FlowID]++
		}
	}
	for i, id := range ids {
		if cancelled[id] != 1 {
			t.Errorf("flow %s: flow.cancelled arrived %d times from %d instances, want once", id, cancelled[id], instances)
		}
		var v struct {
			Flow struct {
				Version int    `json:"version"`
				Status  string `json:"status"`
			} `json:"flow"`
		}
		mustDo(t, "GET", ps[i%instances].URL+"/api/flows/"+id, tok, "").json(t, &v)
		if v.Flow.Status != "cancelled" || v.Flow.Version != 2 { // created, cancelled
			t.Errorf("flow %s: %s at version %d, want cancelled at 2", id, v.Flow.Status, v.Flow.Version)
		}
	}
	for i, p := range ps {
		for _, warning := range []string{"flows: expiring flows", "idempotency: purging expired keys"} {
			if strings.Contains(p.Logs.String(), warning) {
				t.Errorf("instance %d logged %q", i, warning)
			}
		}
	}

	// Each periodic job runs on its schema's leader at start, then hourly.
	for _, job := range []struct{ table, kind string }{
		{"river_job", "flowd.webhook_cleanup"},
		{"flows_river.river_job", "flowd.consent_expiry_sweep"},
	} {
		eventually(t, job.kind+" completed", func() bool {
			return count(t, pool, `select count(*) from `+job.table+` where kind = $1 and state = 'completed'`, job.kind) > 0
		})
		if got := count(t, pool, `select count(*) from `+job.table+` where kind = $1`, job.kind); got != 1 {
			t.Errorf("%d %s jobs with %d instances running, want one", got, job.kind, instances)
		}
	}
}
