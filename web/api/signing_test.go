package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/web/internal/webtest"
)

// bodies is a receiver that keeps every body POSTed to it.
type bodies struct {
	mu  sync.Mutex
	got [][]byte
	srv *httptest.Server
}

func newBodies(t *testing.T) *bodies {
	b := &bodies{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.got = append(b.got, body)
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// await returns the bodies once n have arrived.
func (b *bodies) await(t *testing.T, n int) [][]byte {
	t.Helper()
	deadline := testwait.Deadline(t)
	for {
		b.mu.Lock()
		got := slices.Clone(b.got)
		b.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries arrived, want %d", len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTheCatalogsSchemasValidateTheEventsSent: GET /api/event-types lists
// every event type with a schema and an example; the schema of each type
// validates its example, the events a flow's changes send, and a test event
// of every type, and refuses a body of another type.
func TestTheCatalogsSchemasValidateTheEventsSent(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithWebhooks())
	ctx := context.Background()
	if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) error {
		_, err := e.Hooks.CreateSecretTx(ctx, tx, webtest.OrgA)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r := e.Call(t, "GET", "/api/event-types", webtest.TokARead, "")
	var catalog struct {
		Data []struct {
			Type        string          `json:"type"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Example     any             `json:"example"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &catalog); err != nil || r.Status != 200 {
		t.Fatalf("catalog: %d %s", r.Status, r.Body)
	}
	schemas := map[string]*openapi3.Schema{}
	var listed []string
	for _, et := range catalog.Data {
		listed = append(listed, et.Type)
		var s openapi3.Schema
		if err := json.Unmarshal(et.Schema, &s); err != nil {
			t.Fatalf("%s: schema %s: %v", et.Type, et.Schema, err)
		}
		if strings.Contains(string(et.Schema), "$ref") || et.Description == "" || et.Example == nil {
			t.Errorf("%s: description %q, example %v, schema with a $ref: %v", et.Type, et.Description, et.Example, strings.Contains(string(et.Schema), "$ref"))
		}
		if err := s.VisitJSON(et.Example, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s: its example does not match its schema: %v", et.Type, err)
		}
		schemas[et.Type] = &s
	}
	var want []string
	for _, t := range webhooks.EventTypes {
		want = append(want, string(t))
	}
	if !slices.Equal(listed, want) {
		t.Fatalf("the catalog lists %v, want every event type %v", listed, want)
	}

	rcv := newBodies(t)
	eps := webhooks.NewEndpoints(e.Pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	ep, err := eps.Create(ctx, webtest.OrgA, webhooks.NewEndpoint{URL: rcv.srv.URL, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	flow := e.Create(t, webtest.TokA, nil)
	if r := e.Call(t, "POST", "/api/flows/"+flow+"/cancel", webtest.TokA, ""); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	for _, typ := range want {
		r := e.Call(t, "POST", "/api/webhook-endpoints/"+ep.ID+"/test", webtest.TokA, `{"eventType":"`+typ+`"}`)
		if r.Status != http.StatusAccepted {
			t.Fatalf("test event %s: %d %s", typ, r.Status, r.Body)
		}
	}
	sent := rcv.await(t, 2+len(want))
	seen := map[string]int{}
	for _, body := range sent {
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		typ, _ := v["type"].(string)
		seen[typ]++
		s := schemas[typ]
		if s == nil {
			t.Errorf("a delivery of type %q, which the catalog does not list: %s", typ, body)
			continue
		}
		if err := s.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("the %s sent does not match the catalog's schema: %v\n%s", typ, err, body)
		}
		other := schemas[string(webhooks.FlowAccepted)]
		if typ != string(webhooks.FlowAccepted) && other.VisitJSON(v, openapi3.EnableJSONSchema2020()) == nil {
			t.Errorf("the schema of flow.accepted takes a %s", typ)
		}
	}
	if seen["flow.created"] != 2 || seen["flow.cancelled"] != 2 {
		t.Errorf("types delivered: %v", seen)
	}
}

// TestSendTestEventOverTheAPI: a test event goes to its endpoint alone, is
// listed with test true, and a disabled or unknown endpoint or an unknown
// type is refused.
func TestSendTestEventOverTheAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithWebhooks())
	ctx := context.Background()
	if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) error {
		_, err := e.Hooks.CreateSecretTx(ctx, tx, webtest.OrgA)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tried, other := newBodies(t), newBodies(t)
	eps := webhooks.NewEndpoints(e.Pool, webhooks.EndpointRules{AllowPrivate: true, AllowInsecureURLs: true})
	ep, err := eps.Create(ctx, webtest.OrgA, webhooks.NewEndpoint{URL: tried.srv.URL, Enabled: true, Payload: webhooks.PayloadThin})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eps.Create(ctx, webtest.OrgA, webhooks.NewEndpoint{URL: other.srv.URL, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	off, err := eps.Create(ctx, webtest.OrgA, webhooks.NewEndpoint{URL: other.srv.URL + "/off", Enabled: false})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/api/webhook-endpoints/" + ep.ID + "/test", `{"eventType":"flow.nonsense"}`, 400},
		{"/api/webhook-endpoints/" + off.ID + "/test", ``, 409},
		{"/api/webhook-endpoints/0197aaaa-0000-7000-8000-000000000000/test", ``, 404},
	} {
		if r := e.Call(t, "POST", c.path, webtest.TokA, c.body); r.Status != c.status {
			t.Errorf("POST %s %s: %d %s, want %d", c.path, c.body, r.Status, r.Body, c.status)
		}
	}
	r := e.Call(t, "POST", "/api/webhook-endpoints/"+ep.ID+"/test", webtest.TokA, "")
	var sent struct {
		EventID string `json:"eventId"`
		Type    string `json:"type"`
	}
	if err := json.Unmarshal(r.Body, &sent); err != nil || r.Status != http.StatusAccepted || sent.Type != "flow.created" ||
		r.Header.Get("Location") != "/api/events/"+sent.EventID {
		t.Fatalf("test event: %d %s, Location %q", r.Status, r.Body, r.Header.Get("Location"))
	}
	body := tried.await(t, 1)[0]
	if !strings.Contains(string(body), `"eventId":"`+sent.EventID+`"`) || strings.Contains(string(body), "status") {
		t.Errorf("the thin test delivery: %s", body)
	}
	r = e.Call(t, "GET", "/api/events/"+sent.EventID, webtest.TokARead, "")
	if m := r.JSON(t); r.Status != 200 || m["test"] != true || len(m["deliveries"].([]any)) != 1 {
		t.Errorf("the test event: %d %s", r.Status, r.Body)
	}
	other.mu.Lock()
	n := len(other.got)
	other.mu.Unlock()
	if n != 0 {
		t.Errorf("another endpoint got %d deliveries", n)
	}
	if r := e.Call(t, "GET", "/webhooks/0197aaaa-0000-7000-8000-000000000000/keys", "", ""); r.Status != 404 {
		t.Errorf("the keys of no organization: %d %s", r.Status, r.Body)
	}
}
