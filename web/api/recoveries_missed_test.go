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
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/webtest"
)

// switchedReceiver answers every delivery with status, and counts the
// deliveries it acknowledged (2xx) by webhook-id.
type switchedReceiver struct {
	status atomic.Int32
	mu     sync.Mutex
	acked  map[string]int
	srv    *httptest.Server
}

func newSwitchedReceiver(t testing.TB, status int) *switchedReceiver {
	r := &switchedReceiver{acked: map[string]int{}}
	r.status.Store(int32(status))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s := int(r.status.Load())
		if s >= 200 && s < 300 {
			r.mu.Lock()
			r.acked[req.Header.Get("webhook-id")]++
			r.mu.Unlock()
		}
		w.WriteHeader(s)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *switchedReceiver) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.acked))
	for k, v := range r.acked {
		out[k] = v
	}
	return out
}

// waitFor polls cond until it holds, failing with what once the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := testwait.Deadline(t); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// recoveryState is the part of a recovery the tests read.
type recoveryState struct {
	ID, State          string
	EndpointID, Host   *string
	Total, Scheduled   int
	Error              *string
	Since, RequestedBy string
}

// awaitRecovery polls a recovery's path until it is no longer active.
func (e *apiEnv) awaitRecovery(t *testing.T, path string) recoveryState {
	t.Helper()
	var rec recoveryState
	waitFor(t, "the recovery at "+path+" to finish", func() bool {
		r := e.Call(t, "GET", path, webtest.TokA, "")
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		if err := json.Unmarshal(r.Body, &rec); err != nil {
			t.Fatal(err)
		}
		return rec.State == "done" || rec.State == "failed"
	})
	return rec
}

// eventIDs lists the organization's events of a type, by the events API.
func (e *apiEnv) eventIDs(t *testing.T, typ string) []string {
	t.Helper()
	ids, _, more := e.eventPage(t, webtest.TokA, "type="+typ+"&limit=100")
	if more {
		t.Fatal("more than a page of events")
	}
	return ids
}

// TestRecoveryAfterADisabledWindowOverTheAPI: an endpoint is disabled over
// the API, flows are created, it is enabled again, and a recovery from its
// disabledAt delivers each event of the window once, beside the events it
// had received before; the receiver counts them by webhook-id. A since
// older than the events kept is refused, naming what limits it.
func TestRecoveryAfterADisabledWindowOverTheAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithWebhooks())
	ctx := context.Background()
	if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) error {
		_, err := e.Hooks.CreateSecretTx(ctx, tx, webtest.OrgA)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rcv := newSwitchedReceiver(t, http.StatusNoContent)
	// The API refuses loopback URLs; the module's registry, told to allow
	// them, registers the test's receiver.
	ep, err := webhooks.NewEndpoints(e.Pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true}).
		Create(ctx, webtest.OrgA, webhooks.NewEndpoint{URL: rcv.srv.URL + "/hooks", Enabled: true, EventTypes: []webhooks.EventType{webhooks.FlowCreated}})
	if err != nil {
		t.Fatal(err)
	}
	path := "/api/webhook-endpoints/" + ep.ID
	for range 2 {
		e.Create(t, webtest.TokA, nil)
	}
	waitFor(t, "the events before the outage", func() bool { return len(rcv.counts()) == 2 })

	r := e.Call(t, "PATCH", path, webtest.TokA, `{"enabled":false}`)
	var off struct {
		Enabled    bool
		DisabledAt *string
	}
	if err := json.Unmarshal(r.Body, &off); err != nil || r.Status != http.StatusOK || off.Enabled || off.DisabledAt == nil {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	const n = 12
	for range n {
		e.Create(t, webtest.TokA, nil)
	}
	if r = e.Call(t, "PATCH", path, webtest.TokA, `{"enabled":true}`); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"disabledAt":null`) {
		t.Fatalf("enable: %d %s", r.Status, r.Body)
	}
	if got := len(rcv.counts()); got != 2 {
		t.Fatalf("%d events arrived before the recovery, want the 2 from before the outage", got)
	}

	old := url.QueryEscape(time.Now().Add(-webhooks.DefaultEventRetention - time.Hour).UTC().Format(time.RFC3339))
	if r = e.Call(t, "POST", path+"/recover?since="+old, webtest.TokA, ""); r.Status != http.StatusBadRequest ||
		!slices.Equal(r.Fields(t), []string{"since"}) || !strings.Contains(string(r.Body), "FLOWD_EVENT_RETENTION") {
		t.Fatalf("a since older than the events kept: %d %s", r.Status, r.Body)
	}
	r = e.Call(t, "POST", path+"/recover?since="+url.QueryEscape(*off.DisabledAt), webtest.TokA, "")
	if r.Status != http.StatusAccepted {
		t.Fatalf("recover: %d %s", r.Status, r.Body)
	}
	var queued recoveryState
	if err := json.Unmarshal(r.Body, &queued); err != nil || queued.Total != n || queued.Host != nil {
		t.Fatalf("the recovery: %s", r.Body)
	}
	if rec := e.awaitRecovery(t, r.Header.Get("Location")); rec.State != "done" || rec.Scheduled != n {
		t.Fatalf("finished %+v, want done with %d sent", rec, n)
	}
	all := e.eventIDs(t, "flow.created")
	if len(all) != n+2 {
		t.Fatalf("%d flow.created events, want %d", len(all), n+2)
	}
	waitFor(t, "every event to arrive", func() bool { return len(rcv.counts()) >= len(all) })
	got := rcv.counts()
	for _, id := range all {
		if got[id] != 1 {
			t.Errorf("event %s arrived %d times, want once", id, got[id])
		}
	}
	if len(got) != len(all) {
		t.Errorf("%d webhook-ids arrived, want %d", len(got), len(all))
	}
}

// TestFlowURLRecoveryAPI: flows whose webhookUrl answered 410 Gone have
// deliveries that failed for good and errors; once the receiver is back,
// POST /api/webhook-recoveries with its host sends each again once, and
// the flows' errors clear. What it refuses, and who sees what.
func TestFlowURLRecoveryAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithWebhooks())
	ctx := context.Background()
	if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) error {
		_, err := e.Hooks.CreateSecretTx(ctx, tx, webtest.OrgA)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rcv := newSwitchedReceiver(t, http.StatusGone)
	const n = 6
	var flowIDs []string
	for range n {
		flowIDs = append(flowIDs, e.Create(t, webtest.TokA, map[string]any{"webhookUrl": rcv.srv.URL + "/hooks?token=secret"}))
	}
	waitFor(t, "every delivery to fail for good", func() bool {
		return e.Count(t, `select count(*) from webhook_events where state = 'failed' and endpoint_id is null`) == n
	})
	waitFor(t, "the flows to show their errors", func() bool {
		return e.flowJSON(t, flowIDs[0])["hasErrors"] == true
	})
	rcv.status.Store(http.StatusNoContent)
	host := strings.TrimPrefix(rcv.srv.URL, "http://")
	since := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))

	for _, c := range []struct {
		name, token, query string
		status             int
		fields             []string
	}{
		{"without webhooks:manage", webtest.TokARead, "?since=" + since, http.StatusForbidden, nil},
		{"no since", webtest.TokA, "", http.StatusBadRequest, []string{"since"}},
		{"since not a time", webtest.TokA, "?since=yesterday", http.StatusBadRequest, []string{"since"}},
		{"a URL for a host", webtest.TokA, "?since=" + since + "&host=" + url.QueryEscape("http://"+host+"/hooks"), http.StatusBadRequest, []string{"host"}},
		{"neither", webtest.TokA, "?host=%20a%20b", http.StatusBadRequest, []string{"since", "host"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.Call(t, "POST", "/api/webhook-recoveries"+c.query, c.token, "")
			if r.Status != c.status || (c.fields != nil && !slices.Equal(r.Fields(t), c.fields)) {
				t.Errorf("%d %s, want %d naming %v", r.Status, r.Body, c.status, c.fields)
			}
		})
	}
	if got := e.Count(t, `select count(*) from webhook_recoveries`); got != 0 {
		t.Fatalf("%d recoveries after the refusals", got)
	}

	r := e.Call(t, "POST", "/api/webhook-recoveries?since="+since+"&host="+url.QueryEscape(host), webtest.TokA, "")
	if r.Status != http.StatusAccepted {
		t.Fatalf("recover: %d %s", r.Status, r.Body)
	}
	var rec recoveryState
	if err := json.Unmarshal(r.Body, &rec); err != nil {
		t.Fatal(err)
	}
	location := "/api/webhook-recoveries/" + rec.ID
	if r.Header.Get("Location") != location || rec.EndpointID != nil || rec.Host == nil || *rec.Host != host ||
		rec.Total != n || rec.State != "queued" || rec.RequestedBy != "client:client-a" {
		t.Fatalf("the recovery: %s, Location %s", r.Body, r.Header.Get("Location"))
	}
	if r := e.Call(t, "POST", "/api/webhook-recoveries?since="+since, webtest.TokA, ""); r.Status != http.StatusConflict ||
		!strings.Contains(string(r.Body), "already") || !strings.Contains(string(r.Body), location) {
		t.Errorf("a second recovery: %d %s", r.Status, r.Body)
	}
	if rec = e.awaitRecovery(t, location); rec.State != "done" || rec.Scheduled != n {
		t.Fatalf("finished %+v, want done with %d sent", rec, n)
	}
	waitFor(t, "every delivery to arrive", func() bool { return len(rcv.counts()) >= n })
	for id, c := range rcv.counts() {
		if c != 1 {
			t.Errorf("event %s arrived %d times, want once", id, c)
		}
	}
	waitFor(t, "the flows' errors to clear", func() bool {
		for _, id := range flowIDs {
			if e.flowJSON(t, id)["hasErrors"] != false {
				return false
			}
		}
		return true
	})

	if r := e.Call(t, "GET", "/api/webhook-recoveries", webtest.TokA, ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"id":"`+rec.ID+`"`) {
		t.Errorf("the list: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct {
		name, token, path string
		status            int
	}{
		{"the list without webhooks:manage", webtest.TokARead, "/api/webhook-recoveries", http.StatusForbidden},
		{"one without webhooks:manage", webtest.TokARead, location, http.StatusForbidden},
		{"another organization's", webtest.TokB, location, http.StatusNotFound},
		{"an unknown one", webtest.TokA, "/api/webhook-recoveries/019ab3c6-4444-7f80-9a1b-2c3d4e5f6a7d", http.StatusNotFound},
		{"a malformed one", webtest.TokA, "/api/webhook-recoveries/nope", http.StatusNotFound},
	} {
		if r := e.Call(t, "GET", c.path, c.token, ""); r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.status)
		}
	}
	if r := e.Call(t, "GET", "/api/webhook-recoveries", webtest.TokB, ""); r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != `{"data":[]}` {
		t.Errorf("another organization's list: %d %s", r.Status, r.Body)
	}
	if got := e.audits(t, "webhook.recover"); len(got) != 1 ||
		!strings.HasPrefix(got[0], rec.ID+" recovery "+rec.ID+" of 6 failed deliveries to the flows' webhook URLs on "+host+" since ") {
		t.Errorf("the audit log: %q", got)
	}
}
