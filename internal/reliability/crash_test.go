package reliability_test

import (
	"testing"
	"time"

	"github.com/flowd/flowd/internal/dbtest"
)

// TestKillNineUnderLoad kills flowd (SIGKILL, a real subprocess of the built
// binary) repeatedly while clients create flows with webhooks, restarting it
// on the same address each time. Afterwards every create that got a 201
// exists, no flow is half made, and every event of every flow reached the
// receiver, duplicates under the same webhook-id.
func TestKillNineUnderLoad(t *testing.T) {
	t.Parallel()
	kills, interval := 3, 1500*time.Millisecond
	if long() {
		kills, interval = 10, 2*time.Second
	}
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", nil)
	tn := newTenant(t, p.Env, "Crash Bank", "CRASH")
	rcv := newReceiver(t, tn.WebhookSecret)
	tok := tn.token(t, p.URL)
	pool := openPool(t, dbURL)

	stop := make(chan struct{})
	base := p.URL // every restart listens on the same address
	l, wg := runLoad(t, func() string { return base }, tok, rcv.URL(), 4, stop)
	for range kills {
		time.Sleep(interval)
		before := l.n.Load()
		p.kill(t)
		p = startFlowd(t, dbURL, p.Addr, nil)
		if l.n.Load() == before {
			t.Logf("no create finished between two kills")
		}
	}
	time.Sleep(interval)
	close(stop)
	wg.Wait()

	for _, o := range l.results() {
		if o.Status != 0 && o.Status != 201 && o.Status != 503 {
			t.Errorf("a create around the kills got %d; want 201, no answer, or 503 while starting", o.Status)
		}
	}
	acked := l.acknowledged()
	if len(acked) < 10 {
		t.Fatalf("only %d creates were acknowledged; the load did not run", len(acked))
	}
	t.Logf("%d requests, %d acknowledged, %d kills", len(l.results()), len(acked), kills)
	checkIntegrity(t, pool, acked)
	checkDelivered(t, pool, rcv, 90*time.Second)
	for _, id := range acked[:5] {
		if a := mustDo(t, "GET", p.URL+"/api/flows/"+id, tok, ""); a.Status != 200 {
			t.Errorf("acknowledged flow %s: %d %s", id, a.Status, a.Body)
		}
	}
}
