package reliability_test

import (
	"fmt"
	"testing"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestKillNineUnderLoad kills flowd (SIGKILL, a real subprocess of the built
// binary) repeatedly while clients create flows with webhooks, restarting it
// on the same address each time. Afterwards every create that got a 201
// exists, no flow is half made, and every event of every flow reached the
// receiver, duplicates under the same webhook-id.
func TestKillNineUnderLoad(t *testing.T) {
	t.Parallel()
	// Each kill comes after so many more creates were acknowledged, however
	// fast or slow the machine makes them.
	kills, between := 3, 5
	if long() {
		kills, between = 10, 40
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
	acknowledged := func(n int) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d creates acknowledged", n), func() bool { return len(l.acknowledged()) >= n })
	}
	for k := range kills {
		acknowledged((k + 1) * between)
		p.kill(t)
		p = startFlowd(t, dbURL, p.Addr, nil)
	}
	acknowledged((kills + 1) * between)
	close(stop)
	wg.Wait()

	for _, o := range l.results() {
		if o.Status != 0 && o.Status != 201 && o.Status != 503 {
			t.Errorf("a create around the kills got %d; want 201, no answer, or 503 while starting", o.Status)
		}
	}
	acked := l.acknowledged()
	t.Logf("%d requests, %d acknowledged, %d kills", len(l.results()), len(acked), kills)
	checkIntegrity(t, pool, acked)
	checkDelivered(t, pool, rcv)
	for _, id := range acked[:5] {
		if a := mustDo(t, "GET", p.URL+"/api/flows/"+id, tok, ""); a.Status != 200 {
			t.Errorf("acknowledged flow %s: %d %s", id, a.Status, a.Body)
		}
	}
}
