package reliability_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// orderedReceiver is an endpoint with per-flow ordering: it fails the
// first attempt of every event, and notes each request that arrives before
// an earlier event of its flow was delivered.
type orderedReceiver struct {
	srv        *httptest.Server
	mu         sync.Mutex
	arrived    int
	seen       map[string]int         // webhook-id → requests
	delivered  map[string]map[int]int // flow → sequence → 2xx answers
	violations []string
}

func newOrderedReceiver(t *testing.T) *orderedReceiver {
	r := &orderedReceiver{seen: map[string]int{}, delivered: map[string]map[int]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *orderedReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var ev struct {
		Data struct {
			FlowID   string `json:"flowId"`
			Sequence int    `json:"sequence"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil || ev.Data.FlowID == "" {
		w.WriteHeader(http.StatusNoContent) // not a flow's event
		return
	}
	flow, seq := ev.Data.FlowID, ev.Data.Sequence
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrived++
	if r.delivered[flow] == nil {
		r.delivered[flow] = map[int]int{}
	}
	for before := 1; before < seq; before++ {
		if r.delivered[flow][before] == 0 {
			r.violations = append(r.violations, fmt.Sprintf("flow %s: #%d arrived before #%d was delivered", flow, seq, before))
		}
	}
	id := req.Header.Get("webhook-id")
	r.seen[id]++
	if r.seen[id] == 1 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	r.delivered[flow][seq]++
	w.WriteHeader(http.StatusNoContent)
}

func (r *orderedReceiver) Arrived() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.arrived
}

// deliveredUpTo reports whether every flow has its events 1…n delivered.
func (r *orderedReceiver) deliveredUpTo(flows []string, n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range flows {
		for seq := 1; seq <= n; seq++ {
			if r.delivered[f][seq] == 0 {
				return false
			}
		}
	}
	return true
}

// TestKillNineKeepsPerFlowOrder kills flowd (SIGKILL) repeatedly while an
// endpoint with per-flow ordering receives flows' events, each failing at
// its first attempt, and restarts it. Afterwards every event of every flow
// was delivered, and none arrived before the one before it was delivered.
func TestKillNineKeepsPerFlowOrder(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	extra := map[string]string{"FLOWD_ALLOW_INSECURE_URLS": "true", "FLOWD_CONSENT_AUTH": "none"}
	p := startFlowd(t, dbURL, "", extra)
	tn := newTenant(t, p.Env, "Order Bank", "ORD")
	tok := tn.token(t, p.URL)
	rcv := newOrderedReceiver(t)
	ep := mustDo(t, "POST", p.URL+"/api/webhook-endpoints", tok,
		fmt.Sprintf(`{"url":%q,"ordering":"per-flow","eventTypes":["flow.created","flow.opened","flow.accepted"]}`, rcv.srv.URL+"/hooks"))
	if ep.Status != 201 {
		t.Fatalf("endpoint: %d %s", ep.Status, ep.Body)
	}
	var endpoint struct{ Ordering string }
	ep.json(t, &endpoint)
	if endpoint.Ordering != "per-flow" {
		t.Fatalf("the endpoint's ordering is %q", endpoint.Ordering)
	}

	// Each flow is created, opened and accepted: events 1, 2 and 3. Two
	// flows go out before each kill, which comes once their deliveries have
	// begun to arrive: some are failing and due again, some in flight.
	var flows []string
	for k := range 3 {
		for i := range 2 {
			id, link := createFlow(t, p.URL, tok, fmt.Sprintf("ORD%02d%02d", k, i), "")
			accept(t, link)
			flows = append(flows, id)
		}
		at := rcv.Arrived() + 2
		eventually(t, fmt.Sprintf("%d deliveries arrived before kill %d", at, k+1), func() bool { return rcv.Arrived() >= at })
		p.kill(t)
		p = startFlowd(t, dbURL, p.Addr, extra)
	}
	eventually(t, "every flow's three events delivered", func() bool { return rcv.deliveredUpTo(flows, 3) })
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, v := range rcv.violations {
		t.Error(v)
	}
	t.Logf("%d requests for %d events", rcv.arrived, 3*len(flows))
}
