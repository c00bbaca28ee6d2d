package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/flowd/flowd/web/internal/webtest"
)

// TestACreatesKeyReplaysConflictsAndExpires: the same create with the same
// key, its fields padded with white space the create trims, replays the
// first answer; another request, or the same from another client of the
// organization, is refused; another organization's key is its own;
// concurrent creates with one key make one flow and all answer it; after 24
// hours the key is free again.
func TestACreatesKeyReplaysConflictsAndExpires(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	body := webtest.CreateBody(nil)
	first := e.keyed(t, webtest.TokA, "/api/flows", body, "order-42")
	if first.Status != http.StatusCreated || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	spaced := webtest.CreateBody(map[string]any{"nationalId": " ID-12345", "lastName": "Nordmann\t"})
	if r := e.keyed(t, webtest.TokA, "/api/flows", spaced, "order-42"); r.Status != http.StatusCreated ||
		r.Header.Get("Idempotent-Replayed") != "true" || string(r.Body) != string(first.Body) {
		t.Fatalf("the same create, padded: %d %q %s\nwant the first answer %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body, first.Body)
	}
	other := webtest.CreateBody(map[string]any{"lastName": "Other"})
	for name, r := range map[string]webtest.Response{
		"another request": e.keyed(t, webtest.TokA, "/api/flows", other, "order-42"),
		"another client":  e.keyed(t, webtest.TokASandbox, "/api/flows", body, "order-42"),
	} {
		if !isKeyReused(r) {
			t.Errorf("%s with the same key: %d %s, want the 422 of a reused key", name, r.Status, r.Body)
		}
	}
	orgB := e.keyed(t, webtest.TokB, "/api/flows", webtest.CreateBody(map[string]any{"redirectUrl": "https://beta.example/"}), "order-42")
	if orgB.Status != http.StatusCreated || orgB.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("B with A's key: %d %s", orgB.Status, orgB.Body)
	}
	if got := e.leftovers(t); got != "flows=2 tasks=2 consent=2 keys=2 events=2" {
		t.Fatalf("rows: %s", got)
	}

	// Concurrent creates with one key create one flow and all answer it.
	var (
		mu       sync.Mutex
		ids      = map[string]int{}
		replayed int
		wg       sync.WaitGroup
	)
	for range 12 {
		wg.Go(func() {
			r := e.keyed(t, webtest.TokA, "/api/flows", webtest.CreateBody(map[string]any{"nationalId": "SAME"}), "race")
			if r.Status != http.StatusCreated {
				t.Errorf("concurrent: %d %s", r.Status, r.Body)
				return
			}
			var c struct{ FlowID string }
			_ = json.Unmarshal(r.Body, &c)
			mu.Lock()
			defer mu.Unlock()
			ids[c.FlowID]++
			if r.Header.Get("Idempotent-Replayed") == "true" {
				replayed++
			}
		})
	}
	wg.Wait()
	if len(ids) != 1 || replayed != 11 || e.Count(t, `select count(*) from flows where organization_id = $1`, webtest.OrgA) != 2 {
		t.Fatalf("concurrent same-key creates: flows %v, %d replayed", ids, replayed)
	}

	// After 24 hours the key is free again.
	if _, err := e.Pool.Exec(context.Background(), `update api_idempotency_keys set expires_at = now() - interval '1 second'
		where key = 'order-42' and organization_id = $1`, webtest.OrgA); err != nil {
		t.Fatal(err)
	}
	if r := e.keyed(t, webtest.TokA, "/api/flows", other, "order-42"); r.Status != http.StatusCreated ||
		r.Header.Get("Idempotent-Replayed") != "" || strings.Contains(string(r.Body), first.JSON(t)["flowId"].(string)) {
		t.Fatalf("the expired key: %d %s", r.Status, r.Body)
	}
}

// TestACreatesKeyCarriedOverReplays: a create's key kept by the flows
// module before its keys moved to api_idempotency_keys, as the migration
// one_idempotency_store carries it (the module's keyed hash of the create's
// fields, its sealed link), replays the create's answer byte for byte for
// the same create, padded or not, and only for it.
func TestACreatesKeyCarriedOverReplays(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	first := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{"referenceName": "Loan 7"}))
	if first.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	var c struct {
		FlowID, ReferenceID string
		Links               struct{ Consent struct{ Href string } } `json:"_links"`
	}
	_ = json.Unmarshal(first.Body, &c)
	// The flows module's request key: the client, its mode and the fields,
	// quoted (the definition and parameters only when given).
	request := `"client-a","false","ID-12345","Nordmann","https://bank.example/done","","Loan 7"`
	if _, err := e.Pool.Exec(context.Background(), `insert into api_idempotency_keys (organization_id, key, request_hash, method, path,
		status, header, pii_key_id, body_sealed, expires_at, carried)
		values ($1, 'carried', $2, 'POST', '/api/flows', 201, $3, $4, $5, now() + interval '1 hour', $6)`,
		webtest.OrgA, e.Sealer.Hash("idempotency", request),
		`{"Content-Type":["application/json"],"Location":["/api/flows/`+c.FlowID+`"]}`, e.Sealer.KeyID(),
		e.Sealer.Seal(c.Links.Consent.Href, "idempotency:"+c.FlowID),
		`{"flowId":"`+c.FlowID+`","referenceId":"`+c.ReferenceID+`"}`); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"the create":         webtest.CreateBody(map[string]any{"referenceName": "Loan 7"}),
		"the create, padded": webtest.CreateBody(map[string]any{"referenceName": " Loan 7 ", "flowDefinitionVersion": 0}),
	} {
		r := e.keyed(t, webtest.TokA, "/api/flows", body, "carried")
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" || string(r.Body) != string(first.Body) ||
			r.Header.Get("Location") != "/api/flows/"+c.FlowID || r.Header.Get("Content-Type") != first.Header.Get("Content-Type") {
			t.Fatalf("%s: %d %q %s\nwant the create's answer %s", name, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body, first.Body)
		}
	}
	for name, r := range map[string]webtest.Response{
		"another create":    e.keyed(t, webtest.TokA, "/api/flows", webtest.CreateBody(map[string]any{"referenceName": "Loan 8"}), "carried"),
		"another client":    e.keyed(t, webtest.TokASandbox, "/api/flows", webtest.CreateBody(map[string]any{"referenceName": "Loan 7"}), "carried"),
		"another operation": e.keyed(t, webtest.TokA, "/api/webhook-endpoints", `{"url":"https://hooks.bank.example/a"}`, "carried"),
	} {
		if !isKeyReused(r) || !strings.Contains(string(r.Body), "POST /api/flows") {
			t.Errorf("%s with the carried key: %d %s", name, r.Status, r.Body)
		}
	}
	if n := e.Count(t, `select count(*) from flows`); n != 1 {
		t.Fatalf("%d flows, want the first alone", n)
	}
}
