package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestAnEndpointFlowdDisabledOverTheAPI: an endpoint that has failed for
// six days shows its failingSince; its next failure disables it, which the
// API shows with its reason, and the endpoint.disabled event it sends to the
// organization's other endpoint is listed with flowId and sequence null,
// not among any flow's events. Enabling it clears both.
func TestAnEndpointFlowdDisabledOverTheAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithWebhooks())
	ctx := context.Background()
	if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) error {
		_, err := e.Hooks.CreateSecretTx(ctx, tx, webtest.OrgA)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(dead.Close)
	var mu sync.Mutex
	var got []string // webhook-id, then the body, of each delivery
	watcher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, r.Header.Get("webhook-id"), string(body))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(watcher.Close)
	// The API refuses loopback URLs; the module's registry, told to allow
	// them, registers the test's receivers.
	eps := webhooks.NewEndpoints(e.Pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	ep, err := eps.Create(ctx, webtest.OrgA, webhooks.NewEndpoint{URL: dead.URL + "/h?token=secret", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eps.Create(ctx, webtest.OrgA, webhooks.NewEndpoint{URL: watcher.URL, Enabled: true,
		EventTypes: []webhooks.EventType{webhooks.EndpointDisabled}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `update webhook_endpoints set failing_since = now() - interval '6 days' where id = $1`, ep.ID); err != nil {
		t.Fatal(err)
	}
	r := e.Call(t, "GET", "/api/webhook-endpoints/"+ep.ID, webtest.TokA, "")
	if a := endpointOf(t, r); !a.Enabled || a.FailingSince == nil || a.DisabledReason != nil {
		t.Fatalf("failing for six days: %s", r.Body)
	}

	flow := e.Create(t, webtest.TokA, nil) // its flow.created goes to the failing endpoint
	deadline := testwait.Deadline(t)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no endpoint.disabled arrived")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r = e.Call(t, "GET", "/api/webhook-endpoints/"+ep.ID, webtest.TokA, "")
	a := endpointOf(t, r)
	const reason = "Deliveries failed for 6 days without a success; the last failure: HTTP 503 Service Unavailable."
	if a.Enabled || a.DisabledReason == nil || *a.DisabledReason != reason || a.FailingSince == nil {
		t.Fatalf("disabled: %s", r.Body)
	}

	ids, events, more := e.eventPage(t, webtest.TokARead, "type=endpoint.disabled")
	if len(ids) != 1 || more {
		t.Fatalf("endpoint.disabled events: %v", events)
	}
	ev := events[0]
	data := ev["data"].(map[string]any)
	mu.Lock()
	webhookID, body := got[0], got[1]
	mu.Unlock()
	if ev["flowId"] != nil || ev["sequence"] != nil || ev["id"] != webhookID || data["endpointId"] != ep.ID ||
		data["url"] != dead.URL || data["reason"] != reason || !strings.Contains(body, `"type":"endpoint.disabled"`) {
		t.Fatalf("listed %v; delivered %s %s", ev, webhookID, body)
	}
	if flowEvents, _, _ := e.eventPage(t, webtest.TokARead, "flowId="+flow); len(flowEvents) != 1 {
		t.Errorf("the flow's events: %v, want its flow.created alone", flowEvents)
	}
	r = e.Call(t, "GET", "/api/events/"+webhookID, webtest.TokARead, "")
	var detail struct {
		FlowID     *string `json:"flowId"`
		Deliveries []struct {
			URL string `json:"url"`
		} `json:"deliveries"`
	}
	if err := json.Unmarshal(r.Body, &detail); err != nil || r.Status != 200 || detail.FlowID != nil ||
		len(detail.Deliveries) != 1 || detail.Deliveries[0].URL != watcher.URL {
		t.Fatalf("the event: %d %s", r.Status, r.Body)
	}

	r = e.Call(t, "PATCH", "/api/webhook-endpoints/"+ep.ID, webtest.TokA, `{"enabled":true}`)
	if a := endpointOf(t, r); r.Status != 200 || !a.Enabled || a.DisabledReason != nil || a.FailingSince != nil {
		t.Fatalf("enabled again: %d %s", r.Status, r.Body)
	}
}
