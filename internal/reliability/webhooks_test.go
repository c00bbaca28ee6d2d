package reliability_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// createFlows creates n flows through base with webhookURL and returns their ids.
func createFlows(t *testing.T, base func() string, tok, prefix string, n int, webhookURL string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		a := mustDo(t, "POST", base()+"/api/flows", tok, createBody(fmt.Sprintf("%s%03d", prefix, i), "Lund", webhookURL))
		if a.Status != 201 {
			t.Fatalf("create: %d %s", a.Status, a.Body)
		}
		var c struct{ FlowID string }
		a.json(t, &c)
		ids = append(ids, c.FlowID)
	}
	return ids
}

// TestKilledServerRedeliversInFlightWebhooks: a flowd process killed
// (SIGKILL) while its deliveries wait for the receiver's answer loses none;
// the next process delivers them again under the same webhook-id.
func TestKilledServerRedeliversInFlightWebhooks(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", nil)
	tn := newTenant(t, p.Env, "Killed Bank", "KILL")
	rcv := newReceiver(t, tn.WebhookSecret)
	release := rcv.hold()
	tok := tn.token(t, p.URL)
	pool := openPool(t, dbURL)

	const n = 5
	createFlows(t, func() string { return p.URL }, tok, "KILL", n, rcv.URL())
	eventually(t, "every delivery waiting for its answer", func() bool { return rcv.arrivals() >= n })
	p.kill(t)
	release()

	startFlowd(t, dbURL, "", nil)
	checkDelivered(t, pool, rcv)
	byID := map[string]int{}
	for _, d := range rcv.deliveries() {
		byID[d.ID]++
	}
	if len(byID) != n {
		t.Errorf("%d distinct webhook-ids arrived, want %d", len(byID), n)
	}
	for id, c := range byID {
		if c < 2 {
			t.Errorf("webhook %s arrived %d times, want the interrupted delivery and its redelivery", id, c)
		}
	}
}

// TestTwoInstancesShareWebhookDeliveries: two flowd processes on one
// database share the deliveries: each event arrives exactly once, and the
// delivered counters of their /metrics add up to the number of events.
func TestTwoInstancesShareWebhookDeliveries(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	a := startFlowd(t, dbURL, "", nil)
	b := startFlowd(t, dbURL, "", map[string]string{"FLOWD_BASE_URL": a.URL})
	tn := newTenant(t, a.Env, "Shared Bank", "SHARE")
	rcv := newReceiver(t, tn.WebhookSecret)
	tok := tn.token(t, a.URL)
	pool := openPool(t, dbURL)

	const n = 30
	turn := 0
	createFlows(t, func() string { turn++; return []string{a.URL, b.URL}[turn%2] }, tok, "SHARE", n, rcv.URL())
	checkDelivered(t, pool, rcv)
	byID := map[string]int{}
	for _, d := range rcv.deliveries() {
		byID[d.ID]++
	}
	if len(byID) != n {
		t.Errorf("%d distinct webhook-ids arrived, want %d", len(byID), n)
	}
	for id, c := range byID {
		if c != 1 {
			t.Errorf("webhook %s arrived %d times, want once", id, c)
		}
	}
	if got := deliveredMetric(t, a.URL) + deliveredMetric(t, b.URL); got != n {
		t.Errorf(`flowd_webhook_deliveries_total{outcome="delivered"} sums to %v over both instances, want %d`, got, n)
	}
}

// deliveredMetric reads the delivered-deliveries counter of an instance.
func deliveredMetric(t *testing.T, base string) float64 {
	t.Helper()
	body := scrape(t, base)
	if !strings.Contains(body, "flowd_webhook_delivery_duration_seconds") {
		t.Errorf("%s/metrics lacks the webhook delivery histogram", base)
	}
	return sample(t, body, `flowd_webhook_deliveries_total{outcome="delivered"}`)
}

// scrape reads an instance's /metrics.
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// sample is the value of one series in a scrape, 0 when it is absent.
func sample(t *testing.T, scraped, series string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(scraped, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// TestRotateWebhookSecretCLI: "flowd orgs rotate-webhook-secret" prints the
// new secret; from then on both the new and the previous secret sign every
// delivery. An unknown organization or a missing --org is an error.
func TestRotateWebhookSecretCLI(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", nil)
	tn := newTenant(t, p.Env, "Rotating Bank", "ROT")
	env := getenvOf(p.Env)

	out, err := flowdtest.RunCLI(env, "", "orgs", "rotate-webhook-secret", "--org", tn.OrgID, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 || !strings.HasPrefix(got["webhookSecret"], "whsec_") || got["webhookSecret"] == tn.WebhookSecret {
		t.Fatalf("output %q: %v; want {\"webhookSecret\":\"whsec_…\"}, a new secret", out, err)
	}
	rcv := newReceiver(t, got["webhookSecret"], tn.WebhookSecret)
	createFlows(t, func() string { return p.URL }, tn.token(t, p.URL), "ROT", 1, rcv.URL())
	checkDelivered(t, openPool(t, dbURL), rcv)

	out, err = flowdtest.RunCLI(env, "", "orgs", "rotate-webhook-secret", "--org", tn.OrgID)
	if err != nil || !strings.Contains(out, "whsec_") || !strings.Contains(out, "24 hours") {
		t.Errorf("human output %q, %v", out, err)
	}
	if _, err := flowdtest.RunCLI(env, "", "orgs", "rotate-webhook-secret", "--org", "org-unknown", "--json"); err == nil {
		t.Error("rotating an unknown organization's secret succeeded")
	}
	if _, err := flowdtest.RunCLI(env, "", "orgs", "rotate-webhook-secret"); err == nil {
		t.Error("rotating without --org succeeded")
	}
}
