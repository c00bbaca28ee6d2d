package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/web/internal/webtest"
)

// eventsOf lists the events GET /api/events answers for query, all pages.
func (e *apiEnv) eventPage(t *testing.T, token, query string) (ids []string, events []map[string]any, more bool) {
	t.Helper()
	r := e.Call(t, "GET", "/api/events?"+query, token, "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /api/events?%s: %d %s", query, r.Status, r.Body)
	}
	var page struct {
		HasMore bool             `json:"has_more"`
		Data    []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	for _, ev := range page.Data {
		ids = append(ids, ev["id"].(string))
	}
	return ids, page.Data, page.HasMore
}

func TestTheEventsAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithWebhooks())
	ctx := context.Background()
	var mu sync.Mutex
	var received []map[string]any
	var webhookIDs []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		received = append(received, body)
		webhookIDs = append(webhookIDs, r.Header.Get("webhook-id"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	arrivals := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, got := range webhookIDs {
			if got == id {
				n++
			}
		}
		return n
	}
	waitArrivals := func(id string, want int) {
		t.Helper()
		deadline := testwait.Deadline(t)
		for arrivals(id) < want {
			if time.Now().After(deadline) {
				t.Fatalf("event %s arrived %d times, want %d", id, arrivals(id), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Cleanup(receiver.Close)
	if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) error {
		_, err := e.Hooks.CreateSecretTx(ctx, tx, webtest.OrgA)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	hooked := e.Create(t, webtest.TokA, map[string]any{"webhookUrl": receiver.URL + "/hooks"})
	plain := e.Create(t, webtest.TokA, nil)
	between := time.Now()
	time.Sleep(10 * time.Millisecond)
	e.decideWithEvidence(t, hooked, true)
	e.Create(t, webtest.TokB, map[string]any{"redirectUrl": "https://beta.example/done"})

	ids, events, more := e.eventPage(t, webtest.TokARead, "")
	if len(events) != 3 || more {
		t.Fatalf("events: %d (more %v)", len(events), more)
	}
	for i, want := range []struct {
		typ, flow string
		seq       float64
	}{{"flow.accepted", hooked, 2}, {"flow.created", plain, 1}, {"flow.created", hooked, 1}} {
		ev := events[i]
		data := ev["data"].(map[string]any)
		if ev["type"] != want.typ || ev["flowId"] != want.flow || ev["sequence"] != want.seq || data["sequence"] != want.seq ||
			data["flowId"] != want.flow || data["organizationId"] != webtest.OrgA {
			t.Errorf("event %d: %v, want %s of %s, sequence %v", i, ev, want.typ, want.flow, want.seq)
		}
	}

	for query, want := range map[string]int{
		"type=flow.created": 2,
		"flowId=" + hooked:  2,
		"flowId=" + plain:   1,
		"createdAfter=" + url.QueryEscape(between.UTC().Format(time.RFC3339Nano)):  1,
		"createdBefore=" + url.QueryEscape(between.UTC().Format(time.RFC3339Nano)): 2,
		"limit=2":                    2,
		"starting_after=" + ids[0]:   2,
		"ending_before=" + ids[2]:    2,
		"starting_after=" + ids[2]:   0,
		"type=flow.accepted&limit=1": 1,
	} {
		if got, _, _ := e.eventPage(t, webtest.TokARead, query); len(got) != want {
			t.Errorf("?%s: %d events, want %d", query, len(got), want)
		}
	}
	if got, _, more := e.eventPage(t, webtest.TokARead, "ending_before="+ids[2]+"&limit=1"); len(got) != 1 || got[0] != ids[1] || !more {
		t.Errorf("the page before the oldest, one at a time: %v (more %v)", got, more)
	}
	for query, field := range map[string]string{
		"limit=0": "limit", "limit=101": "limit", "type=flow.nope": "type", "flowId=x": "flowId",
		"starting_after=00000000-0000-7000-8000-000000000000": "starting_after", "createdAfter=yesterday": "createdAfter",
		"starting_after=" + ids[0] + "&ending_before=" + ids[1]: "ending_before", "sort=asc": "sort",
	} {
		r := e.Call(t, "GET", "/api/events?"+query, webtest.TokARead, "")
		if r.Status != http.StatusBadRequest || !strings.Contains(strings.Join(r.Fields(t), " "), field) {
			t.Errorf("?%s: %d %s, want 400 naming %s", query, r.Status, r.Body, field)
		}
	}
	if got, _, _ := e.eventPage(t, webtest.TokB, ""); len(got) != 1 {
		t.Errorf("another organization sees %d events, want its own one", len(got))
	}

	// One event with its delivery and the delivery's attempt.
	deadline := testwait.Deadline(t)
	var detail struct {
		ID         string
		Sequence   int
		Deliveries []struct {
			URL, State string
			Attempts   []struct {
				StatusCode *int `json:"statusCode"`
			}
		}
	}
	for {
		r := e.Call(t, "GET", "/api/events/"+ids[0], webtest.TokARead, "")
		if r.Status != http.StatusOK {
			t.Fatalf("GET /api/events/%s: %d %s", ids[0], r.Status, r.Body)
		}
		_ = json.Unmarshal(r.Body, &detail)
		if len(detail.Deliveries) == 1 && detail.Deliveries[0].State == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery did not arrive: %s", r.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	d := detail.Deliveries[0]
	if d.URL != receiver.URL+"/hooks" || len(d.Attempts) != 1 || d.Attempts[0].StatusCode == nil || *d.Attempts[0].StatusCode != 204 {
		t.Fatalf("the delivery: %+v", d)
	}
	if r := e.Call(t, "GET", "/api/events/"+ids[1], webtest.TokARead, "").JSON(t); len(r["deliveries"].([]any)) != 0 {
		t.Fatalf("an event of a flow without webhook has deliveries: %v", r)
	}
	if r := e.Call(t, "GET", "/api/events/"+ids[0], webtest.TokB, ""); r.Status != http.StatusNotFound {
		t.Fatalf("another organization's event: %d", r.Status)
	}

	// Redelivery: again to every destination, under the same webhook-id.
	if r := e.Call(t, "POST", "/api/events/"+ids[0]+"/redeliver", webtest.TokARead, ""); r.Status != http.StatusForbidden {
		t.Errorf("redeliver without webhooks:manage: %d", r.Status)
	}
	if r := e.Call(t, "POST", "/api/events/"+ids[0]+"/redeliver", webtest.TokA, ""); r.Status != http.StatusAccepted || r.JSON(t)["deliveries"] != 1.0 {
		t.Fatalf("redeliver: %d %s", r.Status, r.Body)
	}
	waitArrivals(ids[0], 2)
	// The plain flow's event had nowhere to go, until an endpoint is named.
	if r := e.Call(t, "POST", "/api/events/"+ids[1]+"/redeliver", webtest.TokA, ""); r.Status != http.StatusConflict {
		t.Errorf("redeliver of an event without destinations: %d %s", r.Status, r.Body)
	}
	const endpointID = "019ab3c6-1111-7f80-9a1b-2c3d4e5f6a7d"
	if _, err := e.Pool.Exec(ctx, `insert into webhook_endpoints (organization_id, id, url) values ($1, $2, $3)`,
		webtest.OrgA, endpointID, receiver.URL+"/endpoint"); err != nil {
		t.Fatal(err)
	}
	for body, status := range map[string]int{
		`{"endpointId":"00000000-0000-7000-8000-000000000000"}`: http.StatusBadRequest,
		`{"endpointId":"` + endpointID + `"}`:                   http.StatusAccepted,
	} {
		if r := e.Call(t, "POST", "/api/events/"+ids[1]+"/redeliver", webtest.TokA, body); r.Status != status {
			t.Errorf("redeliver %s: %d %s", body, r.Status, r.Body)
		}
	}
	waitArrivals(ids[1], 1)
	if r := e.Call(t, "POST", "/api/events/"+ids[1]+"/redeliver", webtest.TokB, ""); r.Status != http.StatusNotFound {
		t.Errorf("another organization redelivers: %d", r.Status)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, body := range received {
		if data := body["data"].(map[string]any); data["sequence"] == nil {
			t.Errorf("a delivery without data.sequence: %v", body)
		}
	}
}

func TestTheEventsAPIPagesOverTenThousandEvents(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	// Ten events share each second, so that the page boundary also falls
	// between events of the same instant. Each has a whole flow.created body,
	// as the document describes the data.
	if _, err := e.Pool.Exec(context.Background(), `
		insert into events (organization_id, id, flow_id, sequence, type, body, created_at)
		select $1, gen_random_uuid(), f, 1, 'flow.created',
			json_build_object('type', 'flow.created', 'timestamp', '2026-01-02T03:04:05.000Z', 'data', json_build_object(
				'flowId', f, 'referenceId', 'ACME-1', 'organizationId', $1::text, 'status', 'Unopened',
				'flowStatus', 'active', 'version', 1, 'sequence', 1))::text,
			timestamptz '2026-01-02T00:00:00Z' + (g / 10) * interval '1 second'
		from (select g, gen_random_uuid()::text as f from generate_series(1, 10000) g) rows`, webtest.OrgA); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var last time.Time
	query, pages := "limit=100", 0
	for {
		ids, events, more := e.eventPage(t, webtest.TokARead, query)
		pages++
		for i, id := range ids {
			at, _ := time.Parse(time.RFC3339Nano, events[i]["createdAt"].(string))
			if seen[id] || (!last.IsZero() && at.After(last)) {
				t.Fatalf("page %d: event %s repeated or out of order", pages, id)
			}
			seen[id], last = true, at
		}
		if !more {
			break
		}
		query = "limit=100&starting_after=" + ids[len(ids)-1]
	}
	if len(seen) != 10000 || pages != 100 {
		t.Fatalf("%d events in %d pages, want 10000 in 100", len(seen), pages)
	}
}
