package api_test

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

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/web/internal/webtest"
)

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
	e := newAPI(t, webtest.WithWebhooks())
	ctx := context.Background()
	if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) error {
		_, err := e.Hooks.CreateSecretTx(ctx, tx, webtest.OrgA)
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
	webtest.InsertEndpoint(t, e.Pool, webtest.OrgA, endpoint, srv.URL+"/hooks", true)
	webtest.InsertEndpoint(t, e.Pool, webtest.OrgA, disabled, srv.URL+"/off", false)
	webtest.InsertEndpoint(t, e.Pool, webtest.OrgA, busy, srv.URL+"/busy", true)
	const n = 30
	failed := webtest.SeedFailedDeliveries(t, e.Pool, webtest.OrgA, endpoint, "http://127.0.0.1:9/gone", n)
	// A recovery of busy is running (its job elsewhere).
	const running = "019ab3d0-4c5d-7e6f-8a9b-0c1d2e3f4a5b"
	if _, err := e.Pool.Exec(ctx, `insert into webhook_recoveries (organization_id, id, endpoint_id, since, state, total, scheduled, requested_by)
		values ($1, $2, $3, now() - interval '1 day', 'running', 2500, 1000, 'client:elsewhere')`, webtest.OrgA, running, busy); err != nil {
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
		{"without webhooks:manage", webtest.TokARead, recoverPath(endpoint), http.StatusForbidden, ""},
		{"no since", webtest.TokA, "/api/webhook-endpoints/" + endpoint + "/recover", http.StatusBadRequest, "since"},
		{"an empty since", webtest.TokA, "/api/webhook-endpoints/" + endpoint + "/recover?since=", http.StatusBadRequest, "since"},
		{"since not a time", webtest.TokA, "/api/webhook-endpoints/" + endpoint + "/recover?since=yesterday", http.StatusBadRequest, "since"},
		{"since in the future", webtest.TokA, "/api/webhook-endpoints/" + endpoint + "/recover?since=" +
			url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), http.StatusBadRequest, "since"},
		{"unknown endpoint", webtest.TokA, recoverPath(unknown), http.StatusNotFound, "No webhook endpoint"},
		{"malformed endpoint id", webtest.TokA, recoverPath("nope"), http.StatusNotFound, "No webhook endpoint"},
		{"another organization's", webtest.TokB, recoverPath(endpoint), http.StatusNotFound, "No webhook endpoint"},
		{"a disabled endpoint", webtest.TokA, recoverPath(disabled), http.StatusConflict, "The endpoint is disabled"},
		{"a recovery running", webtest.TokA, recoverPath(busy), http.StatusConflict,
			"already running (1000 of 2500 deliveries sent again); /api/webhook-endpoints/" + busy + "/recoveries/" + running},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.Call(t, "POST", c.path, c.token, "")
			if r.Status != c.status {
				t.Fatalf("%d %s, want %d", r.Status, r.Body, c.status)
			}
			if c.status == http.StatusBadRequest && !slices.Equal(r.Fields(t), []string{c.detail}) {
				t.Errorf("fields %v, want %s", r.Fields(t), c.detail)
			}
			if c.status != http.StatusBadRequest && !strings.Contains(string(r.Body), c.detail) {
				t.Errorf("problem %s, want %q in it", r.Body, c.detail)
			}
		})
	}
	if got := e.Count(t, `select count(*) from webhook_recoveries`); got != 1 {
		t.Fatalf("%d recoveries after the refusals, want the running one", got)
	}

	r := e.Call(t, "POST", recoverPath(endpoint), webtest.TokA, "")
	if r.Status != http.StatusAccepted {
		t.Fatalf("recover: %d %s", r.Status, r.Body)
	}
	var rec struct {
		ID, EndpointID, State, RequestedBy string
		Total, Scheduled                   int
		Error                              *string
	}
	if err := json.Unmarshal(r.Body, &rec); err != nil {
		t.Fatal(err)
	}
	location := "/api/webhook-endpoints/" + endpoint + "/recoveries/" + rec.ID
	if r.Header.Get("Location") != location || rec.EndpointID != endpoint || rec.State != "queued" || rec.Total != n ||
		rec.Scheduled != 0 || rec.RequestedBy != "client:client-a" {
		t.Fatalf("the recovery: %s, Location %s", r.Body, r.Header.Get("Location"))
	}
	deadline := testwait.Deadline(t)
	for rec.State != "done" {
		if time.Now().After(deadline) {
			t.Fatalf("the recovery did not finish: %+v", rec)
		}
		time.Sleep(50 * time.Millisecond)
		r = e.Call(t, "GET", location, webtest.TokA, "")
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", location, r.Status, r.Body)
		}
		if err := json.Unmarshal(r.Body, &rec); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Scheduled != n || rec.Total != n || rec.Error != nil {
		t.Fatalf("done: %s", r.Body)
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
	if r := e.Call(t, "GET", "/api/webhook-endpoints/"+endpoint+"/recoveries", webtest.TokA, ""); r.Status != http.StatusOK ||
		!strings.Contains(string(r.Body), `"id":"`+rec.ID+`"`) {
		t.Errorf("the list: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct {
		name, token, path string
		status            int
	}{
		{"the list without webhooks:manage", webtest.TokARead, "/api/webhook-endpoints/" + endpoint + "/recoveries", http.StatusForbidden},
		{"one without webhooks:manage", webtest.TokARead, location, http.StatusForbidden},
		{"another organization's list", webtest.TokB, "/api/webhook-endpoints/" + endpoint + "/recoveries", http.StatusNotFound},
		{"another organization's one", webtest.TokB, location, http.StatusNotFound},
		{"an unknown endpoint's list", webtest.TokA, "/api/webhook-endpoints/" + unknown + "/recoveries", http.StatusNotFound},
		{"one under another endpoint", webtest.TokA, "/api/webhook-endpoints/" + busy + "/recoveries/" + rec.ID, http.StatusNotFound},
		{"an unknown one", webtest.TokA, "/api/webhook-endpoints/" + endpoint + "/recoveries/" + unknown, http.StatusNotFound},
		{"a malformed one", webtest.TokA, "/api/webhook-endpoints/" + endpoint + "/recoveries/nope", http.StatusNotFound},
	} {
		if r := e.Call(t, "GET", c.path, c.token, ""); r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.status)
		}
	}

	// A redelivery by the API is audited too.
	if r := e.Call(t, "POST", "/api/events/"+failed[0]+"/redeliver", webtest.TokA, ""); r.Status != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", r.Status, r.Body)
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
