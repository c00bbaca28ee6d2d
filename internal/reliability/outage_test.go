package reliability_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

type flowView struct {
	Flow struct {
		Version      int  `json:"version"`
		HasIncidents bool `json:"hasIncidents"`
		Incidents    map[string]struct {
			Message  string `json:"message"`
			TaskType string `json:"taskType"`
		} `json:"incidents"`
	} `json:"flow"`
}

// TestReceiverOutage: the organization's receiver answers 500 for a while.
// Deliveries are retried; an incident opens on each flow (hasIncidents, the
// version grows) naming the receiver's host; when the receiver is back every
// event arrives, the incidents resolve (the version grows again) and no
// event is dropped.
func TestReceiverOutage(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", nil)
	tn := newTenant(t, p.Env, "Outage Bank", "OUT")
	rcv := newReceiver(t, tn.WebhookSecret)
	rcv.setStatus(http.StatusInternalServerError)
	tok := tn.token(t, p.URL)
	pool := openPool(t, dbURL)

	n := 4
	if long() {
		n = 20
	}
	var ids []string
	for i := range n {
		a := mustDo(t, "POST", p.URL+"/api/flows", tok, createBody(fmt.Sprintf("OUT%03d", i), "Hansen", rcv.URL()))
		if a.Status != 201 {
			t.Fatalf("create: %d %s", a.Status, a.Body)
		}
		var c struct{ FlowID string }
		a.json(t, &c)
		ids = append(ids, c.FlowID)
	}
	opened := map[string]int{}
	for _, id := range ids {
		eventually(t, "an incident on "+id, func() bool {
			var v flowView
			mustDo(t, "GET", p.URL+"/api/flows/"+id, tok, "").json(t, &v)
			if !v.Flow.HasIncidents {
				return false
			}
			for _, inc := range v.Flow.Incidents {
				if !strings.Contains(inc.Message, "127.0.0.1") || inc.TaskType != "send-initiate-webhook" {
					t.Errorf("incident %+v: want the receiver's host and the webhook task", inc)
				}
			}
			if v.Flow.Version < 2 {
				t.Errorf("flow %s has an incident at version %d; opening one is a change", id, v.Flow.Version)
			}
			opened[id] = v.Flow.Version
			return true
		})
	}
	if rcv.failures() < 3*n {
		t.Errorf("the receiver saw %d failed attempts for %d events; retries did not happen", rcv.failures(), n)
	}
	if got := len(rcv.deliveries()); got != 0 {
		t.Fatalf("%d deliveries recorded during the outage", got)
	}
	rcv.setStatus(0)
	checkDelivered(t, pool, rcv)
	for _, id := range ids {
		eventually(t, "the incident of "+id+" resolved", func() bool {
			var v flowView
			mustDo(t, "GET", p.URL+"/api/flows/"+id, tok, "").json(t, &v)
			return !v.Flow.HasIncidents && len(v.Flow.Incidents) == 0 && v.Flow.Version > opened[id]
		})
	}
	if n := count(t, pool, `select count(*) from flow_incidents where resolved_at is null`); n != 0 {
		t.Errorf("%d incidents still open", n)
	}
	if n := count(t, pool, `select count(*) from flow_tasks where task_type = 'send-initiate-webhook' and status <> 'completed'`); n != 0 {
		t.Errorf("%d webhook tasks not completed", n)
	}
}
