package reliability_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// outcome is what one create request got.
type outcome struct {
	Status     int // 0: no answer (connection refused or cut)
	FlowID     string
	RetryAfter string
}

// load creates flows against base() from workers goroutines until stop is
// closed, as an organization's integration would, and records every answer.
type load struct {
	mu       sync.Mutex
	outcomes []outcome
}

func runLoad(t *testing.T, base func() string, tok string, hookURL string, workers int, stop <-chan struct{}) (*load, *sync.WaitGroup) {
	l := &load{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%d%05d", w+1, i)
				a, err := do("POST", base()+"/api/flows", tok, createBody(id, "Lastname"+strconv.Itoa(i), hookURL))
				o := outcome{}
				if err == nil {
					o.Status = a.Status
					o.RetryAfter = a.Header.Get("Retry-After")
					if a.Status == 201 {
						var c struct{ FlowID string }
						a.json(t, &c)
						o.FlowID = c.FlowID
					}
				}
				l.mu.Lock()
				l.outcomes = append(l.outcomes, o)
				l.mu.Unlock()
				if !long() {
					time.Sleep(10 * time.Millisecond) // a steady load, not a flood: the short suite shares 2 cores
				}
				if err != nil {
					time.Sleep(20 * time.Millisecond) // the server is down; do not spin
				}
			}
		})
	}
	return l, &wg
}

func (l *load) results() []outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]outcome(nil), l.outcomes...)
}

// acknowledged lists the flow ids that got a 201.
func (l *load) acknowledged() []string {
	var ids []string
	for _, o := range l.results() {
		if o.Status == 201 {
			ids = append(ids, o.FlowID)
		}
	}
	return ids
}

// checkIntegrity asserts that every acknowledged flow exists and that no flow
// is half made: each has its consent request, its consent task and (having
// a webhookUrl) its flow.created event, and no row of those belongs to no flow.
func checkIntegrity(t *testing.T, pool *pgxpool.Pool, acked []string) {
	t.Helper()
	if n := count(t, pool, `select count(*) from flows where id::text = any($1)`, acked); n != len(acked) {
		t.Errorf("%d of %d acknowledged flows exist", n, len(acked))
	}
	// Every join names the organization too, so that it also runs on
	// Citus, where tables join only on their distribution column.
	checks := map[string]string{
		"flows without consent request": `select count(*) from flows f where not exists (select 1 from consent_requests c where c.organization_id = f.organization_id and c.flow_id = f.id)`,
		"flows without consent task":    `select count(*) from flows f where not exists (select 1 from flow_tasks k where k.organization_id = f.organization_id and k.flow_id = f.id and k.task_type = 'consent')`,
		"flows without flow.created":    `select count(*) from flows f where f.webhook_url <> '' and not exists (select 1 from webhook_events e where e.organization_id = f.organization_id and e.flow_id = f.id::text and e.type = 'flow.created')`,
		"orphan consent requests":       `select count(*) from consent_requests c where not exists (select 1 from flows f where f.organization_id = c.organization_id and f.id = c.flow_id)`,
		"orphan webhook events":         `select count(*) from webhook_events e where e.type <> 'flow.deleted' and not exists (select 1 from flows f where f.organization_id = e.organization_id and f.id::text = e.flow_id)`,
		"orphan tasks":                  `select count(*) from flow_tasks k where not exists (select 1 from flows f where f.organization_id = k.organization_id and f.id = k.flow_id)`,
		"duplicate flow numbers":        `select count(*) from (select organization_id, flow_number from flows group by 1, 2 having count(*) > 1) d`,
	}
	for what, sql := range checks {
		if n := count(t, pool, sql); n != 0 {
			t.Errorf("%s: %d", what, n)
		}
	}
}

// checkDelivered waits until every stored event is delivered and asserts
// that each reached rcv, every copy of one event with the same webhook-id.
func checkDelivered(t *testing.T, pool *pgxpool.Pool, rcv *receiver) {
	t.Helper()
	eventually(t, "every webhook event delivered", func() bool {
		return count(t, pool, `select count(*) from webhook_events where state <> 'delivered'`) == 0
	})
	rows, err := pool.Query(context.Background(), `select id::text, flow_id, type from webhook_events`)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ flow, typ string }
	stored := map[string]key{}
	for rows.Next() {
		var id string
		var k key
		if err := rows.Scan(&id, &k.flow, &k.typ); err != nil {
			t.Fatal(err)
		}
		stored[id] = k
	}
	rows.Close()
	ids := map[key]map[string]bool{}
	for _, d := range rcv.deliveries() {
		k := key{d.FlowID, d.Type}
		if ids[k] == nil {
			ids[k] = map[string]bool{}
		}
		ids[k][d.ID] = true
	}
	for id, k := range stored {
		if !ids[k][id] {
			t.Errorf("event %s (%s of %s) never reached the receiver", id, k.typ, k.flow)
		}
	}
	for k, set := range ids {
		if len(set) != 1 {
			t.Errorf("%s of %s arrived under %d webhook-ids, want one: %v", k.typ, k.flow, len(set), set)
		}
	}
}
