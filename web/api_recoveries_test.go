package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testwait"
)

// seedFailedDeliveries stores n events of org, each with a delivery to
// endpoint that failed for good an hour ago, and returns the events' ids.
func seedFailedDeliveries(t testing.TB, pool *pgxpool.Pool, org, endpoint, url string, n int) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		with ev as (
			insert into events (organization_id, id, flow_id, sequence, type, body, created_at)
			select $1, gen_random_uuid(), gen_random_uuid()::text, 1, 'flow.accepted',
				'{"type":"flow.accepted","timestamp":"2026-01-02T03:04:05.000Z","data":{"sequence":1}}', now() - interval '1 hour'
			from generate_series(1, $3) g
			returning id, flow_id, body, created_at)
		insert into webhook_events (id, organization_id, flow_id, type, url, body, state, last_error, job_id,
			created_at, finished_at, event_id, endpoint_id)
		select gen_random_uuid(), $1, flow_id, 'flow.accepted', $4, body, 'failed', 'Webhook delivery failed: HTTP 503', 0,
			created_at, created_at, id, $2
		from ev
		returning event_id::text`, org, endpoint, n, url)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// insertEndpoint stores an endpoint of org to url, bypassing the rules
// that keep the API's endpoints off loopback.
func insertEndpoint(t testing.TB, pool *pgxpool.Pool, org, id, url string, enabled bool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `insert into webhook_endpoints (organization_id, id, url, enabled) values ($1, $2, $3, $4)`,
		org, id, url, enabled); err != nil {
		t.Fatal(err)
	}
}

// webhookIDs is a receiver that counts the deliveries of each webhook-id.
type webhookIDs struct {
	mu   sync.Mutex
	seen map[string]int
}

func newWebhookReceiver(t testing.TB) (*webhookIDs, *httptest.Server) {
	r := &webhookIDs{seen: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen[req.Header.Get("webhook-id")]++
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *webhookIDs) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.seen))
	for k, v := range r.seen {
		out[k] = v
	}
	return out
}

func TestRecoveryAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t, withWebhooks())
	ctx := context.Background()
	if err := database.WithTx(ctx, e.pool, func(tx database.Tx) error {
		_, err := e.hooks.CreateSecretTx(ctx, tx, orgA)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rcv, srv := newWebhookReceiver(t)
	const (
		endpoint = "019ab3c6-1111-7f80-9a1b-2c3d4e5f6a7d"
		disabled = "019ab3c6-2222-7f80-9a1b-2c3d4e5f6a7d"
		busy     = "019ab3c6-3333-7f80-9a1b-2c3d4e5f6a7d"
		unknown  = "019ab3c6-4444-7f80-9a1b-2c3d4e5f6a7d"
	)
	insertEndpoint(t, e.pool, orgA, endpoint, srv.URL+"/hooks", true)
	insertEndpoint(t, e.pool, orgA, disabled, srv.URL+"/off", false)
	insertEndpoint(t, e.pool, orgA, busy, srv.URL+"/busy", true)
	const n = 30
	failed := seedFailedDeliveries(t, e.pool, orgA, endpoint, "http://127.0.0.1:9/gone", n)
	// A recovery of busy is running (its job elsewhere).
	const running = "019ab3d0-4c5d-7e6f-8a9b-0c1d2e3f4a5b"
	if _, err := e.pool.Exec(ctx, `insert into webhook_recoveries (organization_id, id, endpoint_id, since, state, total, scheduled, requested_by)
		values ($1, $2, $3, now() - interval '1 day', 'running', 2500, 1000, 'client:elsewhere')`, orgA, running, busy); err != nil {
		t.Fatal(err)
	}
	since := url.QueryEscape(time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339))
	recoverPath := func(id string) string { return "/api/webhook-endpoints/" + id + "/recover?since=" + since }

	// Refusals: scope, since, endpoint, and a recovery already running.
	for _, c := range []struct {
		name, token, path string
		status            int
		detail            string // in the problem's detail, or the field named
	}{
		{"without webhooks:manage", tokARead, recoverPath(endpoint), http.StatusForbidden, ""},
		{"no since", tokA, "/api/webhook-endpoints/" + endpoint + "/recover", http.StatusBadRequest, "since"},
		{"an empty since", tokA, "/api/webhook-endpoints/" + endpoint + "/recover?since=", http.StatusBadRequest, "since"},
		{"since not a time", tokA, "/api/webhook-endpoints/" + endpoint + "/recover?since=yesterday", http.StatusBadRequest, "since"},
		{"since in the future", tokA, "/api/webhook-endpoints/" + endpoint + "/recover?since=" +
			url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), http.StatusBadRequest, "since"},
		{"unknown endpoint", tokA, recoverPath(unknown), http.StatusNotFound, "No webhook endpoint"},
		{"malformed endpoint id", tokA, recoverPath("nope"), http.StatusNotFound, "No webhook endpoint"},
		{"another organization's", tokB, recoverPath(endpoint), http.StatusNotFound, "No webhook endpoint"},
		{"a disabled endpoint", tokA, recoverPath(disabled), http.StatusConflict, "The endpoint is disabled"},
		{"a recovery running", tokA, recoverPath(busy), http.StatusConflict,
			"already running (1000 of 2500 deliveries sent again); /api/webhook-endpoints/" + busy + "/recoveries/" + running},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.call(t, "POST", c.path, c.token, "")
			if r.status != c.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, c.status)
			}
			if c.status == http.StatusBadRequest && !slices.Equal(r.fields(t), []string{c.detail}) {
				t.Errorf("fields %v, want %s", r.fields(t), c.detail)
			}
			if c.status != http.StatusBadRequest && !strings.Contains(string(r.body), c.detail) {
				t.Errorf("problem %s, want %q in it", r.body, c.detail)
			}
		})
	}
	if got := e.count(t, `select count(*) from webhook_recoveries`); got != 1 {
		t.Fatalf("%d recoveries after the refusals, want the running one", got)
	}

	r := e.call(t, "POST", recoverPath(endpoint), tokA, "")
	if r.status != http.StatusAccepted {
		t.Fatalf("recover: %d %s", r.status, r.body)
	}
	var rec struct {
		ID, EndpointID, State, RequestedBy string
		Total, Scheduled                   int
		Error                              *string
	}
	if err := json.Unmarshal(r.body, &rec); err != nil {
		t.Fatal(err)
	}
	location := "/api/webhook-endpoints/" + endpoint + "/recoveries/" + rec.ID
	if r.header.Get("Location") != location || rec.EndpointID != endpoint || rec.State != "queued" || rec.Total != n ||
		rec.Scheduled != 0 || rec.RequestedBy != "client:client-a" {
		t.Fatalf("the recovery: %s, Location %s", r.body, r.header.Get("Location"))
	}
	deadline := testwait.Deadline(t)
	for rec.State != "done" {
		if time.Now().After(deadline) {
			t.Fatalf("the recovery did not finish: %+v", rec)
		}
		time.Sleep(50 * time.Millisecond)
		r = e.call(t, "GET", location, tokA, "")
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", location, r.status, r.body)
		}
		if err := json.Unmarshal(r.body, &rec); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Scheduled != n || rec.Total != n || rec.Error != nil {
		t.Fatalf("done: %s", r.body)
	}
	for deadline := testwait.Deadline(t); len(rcv.counts()) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries arrived", len(rcv.counts()), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := rcv.counts()
	for _, id := range failed {
		if got[id] != 1 {
			t.Errorf("event %s arrived %d times, want once", id, got[id])
		}
	}

	// The list, newest first, and what is not there.
	if r := e.call(t, "GET", "/api/webhook-endpoints/"+endpoint+"/recoveries", tokA, ""); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"id":"`+rec.ID+`"`) {
		t.Errorf("the list: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		name, token, path string
		status            int
	}{
		{"the list without webhooks:manage", tokARead, "/api/webhook-endpoints/" + endpoint + "/recoveries", http.StatusForbidden},
		{"one without webhooks:manage", tokARead, location, http.StatusForbidden},
		{"another organization's list", tokB, "/api/webhook-endpoints/" + endpoint + "/recoveries", http.StatusNotFound},
		{"another organization's one", tokB, location, http.StatusNotFound},
		{"an unknown endpoint's list", tokA, "/api/webhook-endpoints/" + unknown + "/recoveries", http.StatusNotFound},
		{"one under another endpoint", tokA, "/api/webhook-endpoints/" + busy + "/recoveries/" + rec.ID, http.StatusNotFound},
		{"an unknown one", tokA, "/api/webhook-endpoints/" + endpoint + "/recoveries/" + unknown, http.StatusNotFound},
		{"a malformed one", tokA, "/api/webhook-endpoints/" + endpoint + "/recoveries/nope", http.StatusNotFound},
	} {
		if r := e.call(t, "GET", c.path, c.token, ""); r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
		}
	}

	// A redelivery by the API is audited too.
	if r := e.call(t, "POST", "/api/events/"+failed[0]+"/redeliver", tokA, ""); r.status != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", r.status, r.body)
	}
	for action, want := range map[string][]string{
		"webhook_endpoint.recover": {endpoint + " recovery " + rec.ID + " of 30 failed deliveries since " + mustUnescape(t, since)},
		"event.redeliver":          {failed[0] + " flow.accepted of flow "},
	} {
		got := e.audits(t, action)
		if len(got) != len(want) || !strings.HasPrefix(got[0], want[0]) {
			t.Errorf("audit entries %s: %q, want %q", action, got, want)
		}
	}
	if got := e.audits(t, "event.redeliver"); len(got) == 1 && !strings.HasSuffix(got[0], " to every destination (1 delivery)") {
		t.Errorf("the redelivery's entry: %q", got[0])
	}
}

func mustUnescape(t *testing.T, s string) string {
	t.Helper()
	v, err := url.QueryUnescape(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
