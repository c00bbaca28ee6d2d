package reliability_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestWebhookSSRFRefusedAtDeliveryTime: with FLOWD_WEBHOOK_ALLOW_PRIVATE=false
// (production), webhook URLs that reach loopback, private, link-local,
// unspecified or other special-purpose addresses — literally, in an IPv6
// spelling of an IPv4 address, or through a DNS name resolving there —
// are accepted as URLs but refused when the sender connects: the receiver
// listening on loopback never hears a thing, and each attempt records why.
func TestWebhookSSRFRefusedAtDeliveryTime(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", map[string]string{"FLOWD_WEBHOOK_ALLOW_PRIVATE": "false"})
	tn := newTenant(t, p.Env, "SSRF Bank", "SSRF")
	rcv := newReceiver(t, tn.WebhookSecret)
	tok := tn.token(t, p.URL)
	pool := openPool(t, dbURL)
	port := rcv.srv.Listener.Addr().String()[strings.LastIndex(rcv.srv.Listener.Addr().String(), ":"):]
	targets := []string{
		rcv.URL(),                                  // 127.0.0.1, http allowed at create for loopback
		"http://localhost" + port + "/hooks",       // a DNS name resolving to loopback
		"http://[::1]" + port + "/hooks",           // IPv6 loopback
		"https://10.1.2.3/hooks",                   // private
		"https://192.168.0.1/hooks",                // private
		"https://169.254.169.254/latest/meta-data", // link-local: cloud metadata
		"https://0.0.0.0" + port + "/hooks",        // unspecified, reaches loopback on Linux
		"https://[fd00::1]/hooks",                  // unique local IPv6
		"https://[2002:7f00:1::1]/hooks",           // 6to4 of loopback
		"https://[2002:a9fe:a9fe::1]/hooks",        // 6to4 of link-local
		"https://[64:ff9b:1::a00:1]/hooks",         // local-use NAT64 of private
		"https://[::127.0.0.1]/hooks",              // IPv4-compatible loopback
		"https://[fec0::1]/hooks",                  // deprecated site-local
		"https://[100::1]/hooks",                   // discard-only
	}
	var flows []string
	for i, u := range targets {
		a := mustDo(t, "POST", p.URL+"/api/flows", tok, createBody("SSRF"+string(rune('A'+i)), "Berg", u))
		if a.Status != 201 {
			t.Errorf("create with webhookUrl %s: %d %s", u, a.Status, a.Body)
			continue
		}
		var c struct{ FlowID string }
		a.json(t, &c)
		flows = append(flows, c.FlowID)
	}
	eventually(t, "a refused attempt for every event", func() bool {
		return count(t, pool, `select count(distinct e.id) from webhook_events e join webhook_attempts a on a.organization_id = e.organization_id and a.event_id = e.id
			where a.error <> '' and a.status_code = 0`) == len(flows)
	})
	if got := rcv.deliveries(); len(got) != 0 || rcv.failures() != 0 {
		t.Errorf("the loopback receiver was reached: %d deliveries, %d failures", len(got), rcv.failures())
	}
	if n := count(t, pool, `select count(*) from webhook_events where state = 'delivered'`); n != 0 {
		t.Errorf("%d events delivered to private addresses", n)
	}
	rows, err := pool.Query(context.Background(), `select distinct a.error from webhook_attempts a`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var msg string
		_ = rows.Scan(&msg)
		if !strings.Contains(msg, "refused to connect") {
			t.Errorf("an attempt failed for another reason than the address guard: %s", msg)
		}
	}
}
