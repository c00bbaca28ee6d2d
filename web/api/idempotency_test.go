package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/web/internal/webtest"
)

// keyedCall is one POST of the API that a test sends with an Idempotency-Key.
type keyedCall struct {
	path, body string
	// otherPath and otherBody make another request than path and body.
	otherPath, otherBody string
	// subject names what the request changes, for counting its effect.
	subject string
}

// idempotentRoute is how the tests exercise one POST of the API.
type idempotentRoute struct {
	status int // the answer of a success
	// prepare makes what the n-th request of the test needs in e.
	prepare func(t *testing.T, e *apiEnv, n int) keyedCall
	// effects counts what c did in e; nil for a request that changes nothing.
	effects func(t *testing.T, e *apiEnv, c keyedCall) int
	// lockTable is the table a request writes its key to.
	lockTable string
}

const testDefinition = `{"id":"%s","title":{"en":"Loan check","nb":"Lånesjekk"},"purpose":{"en":"%s","nb":"Vi sjekker inntekten din."},"validity":"P90D"}`

// idempotentRoutes are every POST under /api that a client with a token
// makes, by echo's path; TestEveryPOSTOfTheAPIHonoursIdempotencyKeys fails
// for a route without one.
var idempotentRoutes = map[string]idempotentRoute{
	"/api/resources": {
		status: http.StatusCreated,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			uri := fmt.Sprintf("https://api.holder.example/r%d", n)
			return keyedCall{path: "/api/resources", body: `{"uri":"` + uri + `","name":"Records"}`, subject: uri,
				otherBody: `{"uri":"` + uri + `","name":"Other records"}`}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from resources where uri = $1`, c.subject)
		},
	},
	"/api/erasures": {
		status: http.StatusCreated,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			person := fmt.Sprintf("ERASE-%d", n)
			id := e.Create(t, webtest.TokA, map[string]any{"nationalId": person})
			return keyedCall{path: "/api/erasures", body: `{"nationalId":"` + person + `"}`, subject: id,
				otherBody: `{"nationalId":"` + person + `","keepReceipts":true}`}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from flow_deletions where flow_id = $1`, c.subject)
		},
	},
	"/api/flows": {
		status: http.StatusCreated,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			ref := fmt.Sprintf("Loan %d", n)
			return keyedCall{path: "/api/flows", body: webtest.CreateBody(map[string]any{"referenceName": ref}), subject: ref,
				otherBody: webtest.CreateBody(map[string]any{"referenceName": ref, "lastName": "Other"})}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from flows where reference_name = $1`, c.subject)
		},
	},
	"/api/flows/:id/cancel": {
		status: http.StatusOK,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			id, other := e.Create(t, webtest.TokA, nil), e.Create(t, webtest.TokA, nil)
			return keyedCall{path: "/api/flows/" + id + "/cancel", otherPath: "/api/flows/" + other + "/cancel", subject: id}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from test_events where kind = 'flow.cancelled' and flow_id = $1`, c.subject)
		},
	},
	"/api/flows/:id/withdraw": {
		status: http.StatusOK,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			id := e.Create(t, webtest.TokA, nil)
			e.decideWithEvidence(t, id, true)
			return keyedCall{path: "/api/flows/" + id + "/withdraw", subject: id,
				body: `{"reason":"The person asked us by phone."}`, otherBody: `{"reason":"The person wrote to us."}`}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from test_events where kind = 'flow.withdrawn' and flow_id = $1`, c.subject)
		},
	},
	"/api/flows/:id/uses": {
		status: http.StatusCreated,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			id := e.Create(t, webtest.TokA, nil)
			e.decideWithEvidence(t, id, true)
			return keyedCall{path: "/api/flows/" + id + "/uses", subject: id,
				body: `{"action":"fetched income 2025"}`, otherBody: `{"action":"fetched debts 2025"}`}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from flow_uses where flow_id = $1`, c.subject)
		},
	},
	"/api/receipts/subject": {
		status: http.StatusOK,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			id := e.Create(t, webtest.TokA, map[string]any{"nationalId": "12345678901"})
			e.decideWithEvidence(t, id, true)
			receipt := e.attachments(t, id)[0]
			return keyedCall{path: "/api/receipts/subject",
				body:      fmt.Sprintf(`{"receipt":%q,"nationalId":"12345678901"}`, receipt),
				otherBody: fmt.Sprintf(`{"receipt":%q,"nationalId":"10987654321"}`, receipt)}
		},
	},
	"/api/events/:id/redeliver": {
		status: http.StatusAccepted,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			endpoint := fmt.Sprintf("019ab3c6-%04d-7f80-9a1b-2c3d4e5f6a7d", n)
			webtest.InsertEndpoint(t, e.Pool, webtest.OrgA, endpoint, "https://hooks.bank.example/redeliver", true)
			event := webtest.SeedFailedDeliveries(t, e.Pool, webtest.OrgA, endpoint, "https://hooks.bank.example/redeliver", 1)[0]
			return keyedCall{path: "/api/events/" + event + "/redeliver", subject: event,
				otherBody: fmt.Sprintf(`{"endpointId":%q}`, endpoint)}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from test_events where kind = 'audit' and status = $1 and reference_id = $2`,
				identity.AuditEventRedeliver, c.subject)
		},
	},
	"/api/flow-definitions": {
		status: http.StatusCreated,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			id := fmt.Sprintf("loan-check-%d", n)
			return keyedCall{path: "/api/flow-definitions", subject: id, body: fmt.Sprintf(testDefinition, id, "We check your income."),
				otherBody: fmt.Sprintf(testDefinition, id, "We check your debts.")}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from consent_definition_versions where definition_id = $1`, c.subject)
		},
	},
	"/api/flow-definitions/:id/versions": {
		status: http.StatusCreated,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			id := e.definition(t, fmt.Sprintf("publish-me-%d", n))
			return keyedCall{path: "/api/flow-definitions/" + id + "/versions", subject: id,
				body:      `{"title":{"en":"Loan check","nb":"Lånesjekk"},"purpose":{"en":"We check your income and debts.","nb":"Vi sjekker."}}`,
				otherBody: `{"title":{"en":"Loan check","nb":"Lånesjekk"},"purpose":{"en":"We check your savings.","nb":"Vi sjekker."}}`}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from consent_definition_versions where definition_id = $1`, c.subject) - 1
		},
	},
	"/api/flow-definitions/:id/retire": {
		status: http.StatusOK,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			id, other := e.definition(t, fmt.Sprintf("retire-me-%d", n)), e.definition(t, fmt.Sprintf("retire-too-%d", n))
			return keyedCall{path: "/api/flow-definitions/" + id + "/retire", otherPath: "/api/flow-definitions/" + other + "/retire", subject: id}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from consent_definitions where id = $1 and retired_at is not null`, c.subject)
		},
	},
	"/api/webhook-endpoints": {
		status: http.StatusCreated,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			u := fmt.Sprintf("https://hooks.bank.example/flowd/%d", n)
			return keyedCall{path: "/api/webhook-endpoints", subject: u, body: fmt.Sprintf(`{"url":%q,"description":"Decisions"}`, u),
				otherBody: fmt.Sprintf(`{"url":%q,"description":"Other decisions"}`, u)}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from webhook_endpoints where url = $1`, c.subject)
		},
	},
	"/api/webhook-endpoints/:id/recover": {
		status: http.StatusAccepted,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			endpoint := fmt.Sprintf("019ab3c6-%04d-7f80-9a1b-2c3d4e5f6a7e", n)
			webtest.InsertEndpoint(t, e.Pool, webtest.OrgA, endpoint, "https://hooks.bank.example/recover", true)
			webtest.SeedFailedDeliveries(t, e.Pool, webtest.OrgA, endpoint, "https://hooks.bank.example/recover", 3)
			since := func(d time.Duration) string {
				return url.QueryEscape(time.Now().Add(-d).UTC().Truncate(time.Second).Format(time.RFC3339))
			}
			path := "/api/webhook-endpoints/" + endpoint + "/recover?since="
			return keyedCall{path: path + since(2*time.Hour), otherPath: path + since(3*time.Hour), subject: endpoint}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from webhook_recoveries where endpoint_id = $1`, c.subject)
		},
	},
	"/api/webhook-endpoints/:id/test": {
		status: http.StatusAccepted,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			endpoint := fmt.Sprintf("019ab3c7-%04d-7f80-9a1b-2c3d4e5f6a7e", n)
			webtest.InsertEndpoint(t, e.Pool, webtest.OrgA, endpoint, "https://hooks.bank.example/test", true)
			return keyedCall{path: "/api/webhook-endpoints/" + endpoint + "/test", body: `{"eventType":"flow.accepted"}`,
				otherBody: `{"eventType":"flow.rejected"}`, subject: endpoint}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from webhook_events where endpoint_id = $1 and test`, c.subject)
		},
	},
	"/api/webhook-recoveries": {
		status: http.StatusAccepted,
		prepare: func(t *testing.T, e *apiEnv, n int) keyedCall {
			host := fmt.Sprintf("hooks-%d.bank.example", n)
			since := url.QueryEscape(time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339))
			path := "/api/webhook-recoveries?since=" + since + "&host="
			return keyedCall{path: path + host, otherPath: path + "other-" + host, subject: host}
		},
		effects: func(t *testing.T, e *apiEnv, c keyedCall) int {
			return e.Count(t, `select count(*) from webhook_recoveries where organization_id = $1 and endpoint_id is null`, webtest.OrgA)
		},
	},
}

// publicPOSTs are the POSTs under /api that take no token and so no key:
// checking a receipt is a pure read anyone may make.
var publicPOSTs = []string{"/api/receipts/verify"}

// definition publishes a consent definition id through the API and returns
// id. Each route's case names its own: the routes come in any order.
func (e *apiEnv) definition(t *testing.T, id string) string {
	t.Helper()
	if r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, fmt.Sprintf(testDefinition, id, "We check your income.")); r.Status != http.StatusCreated {
		t.Fatalf("definition: %d %s", r.Status, r.Body)
	}
	return id
}

// reencoded is a JSON body written otherwise: members in another order, with
// white space. It is the same request.
func reencoded(t *testing.T, body string) string {
	t.Helper()
	if body == "" {
		return ""
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(v, " ", "\t")
	if err != nil {
		t.Fatal(err)
	}
	return " " + string(out) + "\n"
}

// keyed sends c's request (or its other one) with an Idempotency-Key.
func (e *apiEnv) keyed(t *testing.T, token, path, body, key string) webtest.Response {
	t.Helper()
	return e.Call(t, "POST", path, token, body, "Idempotency-Key", key)
}

// isKeyReused reports whether r is the 422 of a key used with another request.
func isKeyReused(r webtest.Response) bool {
	return r.Status == http.StatusUnprocessableEntity && strings.Contains(string(r.Body), "/docs#problem-idempotency-key-reused")
}

// TestEveryPOSTOfTheAPIHonoursIdempotencyKeys walks the server's routes: for
// every POST under /api, the same key with the same request replays the
// first answer (status, body, Location) with Idempotent-Replayed: true and
// does the change once; with another request, or from another client, it is
// a 422; a key over 255 characters is a 400 that changes nothing.
func TestEveryPOSTOfTheAPIHonoursIdempotencyKeys(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	var paths []string
	for _, r := range webtest.NewServer(t, web.Deps{Pool: e.Pool}).Echo().Routes() {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.Path, "/api/") || slices.Contains(publicPOSTs, r.Path) {
			continue
		}
		paths = append(paths, r.Path)
		if _, ok := idempotentRoutes[r.Path]; !ok {
			t.Errorf("POST %s has no case in idempotentRoutes: does it honour Idempotency-Key?", r.Path)
		}
	}
	for path := range idempotentRoutes {
		if !slices.Contains(paths, path) {
			t.Errorf("idempotentRoutes names POST %s, which the server does not route", path)
		}
	}
	for n, path := range paths {
		route := idempotentRoutes[path]
		if route.prepare == nil {
			continue
		}
		t.Run(strings.ReplaceAll(path, "/", "_"), func(t *testing.T) {
			c := route.prepare(t, e, n)
			effects := func() int {
				if route.effects == nil {
					return 0
				}
				return route.effects(t, e, c)
			}
			if r := e.keyed(t, webtest.TokA, c.path, c.body, strings.Repeat("k", 256)); r.Status != http.StatusBadRequest ||
				!slices.Contains(r.Fields(t), "Idempotency-Key") || effects() != 0 {
				t.Fatalf("a key of 256 characters: %d %s, %d effects", r.Status, r.Body, effects())
			}
			key := "key-" + path
			first := e.keyed(t, webtest.TokA, c.path, c.body, key)
			if first.Status != route.status || first.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("first: %d %q %s", first.Status, first.Header.Get("Idempotent-Replayed"), first.Body)
			}
			again := e.keyed(t, webtest.TokA, c.path, reencoded(t, c.body), key)
			if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" ||
				again.Header.Get("Location") != first.Header.Get("Location") || again.Header.Get("Content-Type") != first.Header.Get("Content-Type") {
				t.Fatalf("replay: %d %q Location %q %s\nwant the first answer: %d Location %q %s", again.Status,
					again.Header.Get("Idempotent-Replayed"), again.Header.Get("Location"), again.Body,
					first.Status, first.Header.Get("Location"), first.Body)
			}
			if route.effects != nil && effects() != 1 {
				t.Fatalf("%d effects of a request and its replay, want 1", effects())
			}
			otherPath, otherBody := c.path, c.body
			if c.otherPath != "" {
				otherPath = c.otherPath
			}
			if c.otherBody != "" {
				otherBody = c.otherBody
			}
			if r := e.keyed(t, webtest.TokA, otherPath, otherBody, key); !isKeyReused(r) {
				t.Errorf("another request with the key: %d %s", r.Status, r.Body)
			}
			if r := e.keyed(t, webtest.TokASandbox, c.path, c.body, key); !isKeyReused(r) {
				t.Errorf("another client with the key: %d %s", r.Status, r.Body)
			}
			if route.effects != nil && effects() != 1 {
				t.Fatalf("%d effects after the refusals, want 1", effects())
			}
		})
	}
}

// TestConcurrentRequestsWithOneKeyChangeOnce: requests with the same key
// that run at once change once, and all get the same answer. The key's
// table is locked until every request waits on a lock, so that each has
// passed the look-up of its key before any keeps its answer.
func TestConcurrentRequestsWithOneKeyChangeOnce(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	n := 100
	for path, route := range idempotentRoutes {
		n++
		t.Run(strings.ReplaceAll(path, "/", "_"), func(t *testing.T) {
			c := route.prepare(t, e, n)
			table := route.lockTable
			if table == "" {
				table = "api_idempotency_keys"
			}
			answers := raceKeyed(t, e, table, c, "race-"+path, 4)
			replays := 0
			for _, r := range answers {
				if r.Status != route.status || !bytes.Equal(r.Body, answers[0].Body) {
					t.Errorf("answers differ: %d %s\nand %d %s", r.Status, r.Body, answers[0].Status, answers[0].Body)
				}
				if r.Header.Get("Idempotent-Replayed") == "true" {
					replays++
				}
			}
			if route.effects == nil {
				return
			}
			if got := route.effects(t, e, c); got != 1 || replays != len(answers)-1 {
				t.Fatalf("%d effects, %d of %d answers replayed; want 1 effect, every other answer replayed", got, replays, len(answers))
			}
		})
	}
}

// raceKeyed sends n copies of c's request with key at once, while table is
// locked against writes until all n wait on a lock, and returns their
// answers.
func raceKeyed(t *testing.T, e *apiEnv, table string, c keyedCall, key string, n int) []webtest.Response {
	t.Helper()
	ctx := context.Background()
	lock, err := e.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, "lock table "+pgx.Identifier{table}.Sanitize()+" in exclusive mode"); err != nil {
		t.Fatal(err)
	}
	answers := make([]webtest.Response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = e.keyed(t, webtest.TokA, c.path, c.body, key) })
	}
	// On Citus the requests wait on the workers' shards, which only
	// citus_stat_activity shows across the cluster.
	activity := "pg_stat_activity"
	if dbtest.Citus() {
		activity = "citus_stat_activity"
	}
	deadline := testwait.Deadline(t)
	for {
		waiting := e.Count(t, `select count(*) from `+activity+` where datname = current_database() and wait_event_type = 'Lock'`)
		if waiting >= n {
			break
		}
		if time.Now().After(deadline) {
			_ = lock.Rollback(ctx)
			wg.Wait()
			t.Fatalf("only %d of %d requests wait on a lock", waiting, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return answers
}

// TestAFailedRequestLeavesItsKeyFree: only a success is kept. A request
// refused (400, 409) changed nothing, and the same key may then carry a
// corrected request.
func TestAFailedRequestLeavesItsKeyFree(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	if r := e.keyed(t, webtest.TokA, "/api/webhook-endpoints", `{"url":"ftp://hooks.bank.example/"}`, "k-endpoint"); r.Status != http.StatusBadRequest {
		t.Fatalf("an invalid endpoint: %d %s", r.Status, r.Body)
	}
	body := `{"url":"https://hooks.bank.example/fixed"}`
	first := e.keyed(t, webtest.TokA, "/api/webhook-endpoints", body, "k-endpoint")
	if first.Status != http.StatusCreated || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the corrected request: %d %s", first.Status, first.Body)
	}
	if again := e.keyed(t, webtest.TokA, "/api/webhook-endpoints", body, "k-endpoint"); again.Header.Get("Idempotent-Replayed") != "true" ||
		!bytes.Equal(again.Body, first.Body) {
		t.Fatalf("its replay: %d %s", again.Status, again.Body)
	}

	cancelled := e.Create(t, webtest.TokA, nil)
	if r := e.Call(t, "POST", "/api/flows/"+cancelled+"/cancel", webtest.TokA, ""); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d", r.Status)
	}
	if r := e.keyed(t, webtest.TokA, "/api/flows/"+cancelled+"/cancel", "", "k-cancel"); r.Status != http.StatusConflict {
		t.Fatalf("cancelling a cancelled flow: %d %s", r.Status, r.Body)
	}
	active := e.Create(t, webtest.TokA, nil)
	if r := e.keyed(t, webtest.TokA, "/api/flows/"+active+"/cancel", "", "k-cancel"); r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the key after a conflict, on another flow: %d %s", r.Status, r.Body)
	}
}

// TestAKeyServesOneOperationAcrossFlowCreation: flow creation keeps its keys
// apart, yet a key used there is refused for any other operation, and the
// other way round, within its organization only.
func TestAKeyServesOneOperationAcrossFlowCreation(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	if r := e.keyed(t, webtest.TokA, "/api/webhook-endpoints", `{"url":"https://hooks.bank.example/a"}`, "k-1"); r.Status != http.StatusCreated {
		t.Fatalf("endpoint: %d %s", r.Status, r.Body)
	}
	if r := e.keyed(t, webtest.TokA, "/api/flows", webtest.CreateBody(nil), "k-1"); !isKeyReused(r) || !strings.Contains(string(r.Body), "POST /api/webhook-endpoints") {
		t.Fatalf("a flow with the endpoint's key: %d %s", r.Status, r.Body)
	}
	if r := e.keyed(t, webtest.TokA, "/api/flows", webtest.CreateBody(nil), "k-2"); r.Status != http.StatusCreated {
		t.Fatalf("flow: %d %s", r.Status, r.Body)
	}
	if r := e.keyed(t, webtest.TokA, "/api/webhook-endpoints", `{"url":"https://hooks.bank.example/b"}`, "k-2"); !isKeyReused(r) ||
		!strings.Contains(string(r.Body), "POST /api/flows") {
		t.Fatalf("an endpoint with the flow's key: %d %s", r.Status, r.Body)
	}
	if r := e.keyed(t, webtest.TokB, "/api/webhook-endpoints", `{"url":"https://hooks.beta.example/b"}`, "k-2"); r.Status != http.StatusCreated {
		t.Fatalf("another organization's endpoint with the key: %d %s", r.Status, r.Body)
	}
	if n := e.Count(t, `select count(*) from flows`) + e.Count(t, `select count(*) from webhook_endpoints`); n != 3 {
		t.Fatalf("%d flows and endpoints, want 3", n)
	}
}

// TestADeletedFlowTakesItsKeptAnswersAlong: an answer that shows a flow (its
// national id) is deleted with the flow; the key then carries its request
// anew, which finds no flow.
func TestADeletedFlowTakesItsKeptAnswersAlong(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.Create(t, webtest.TokA, nil)
	if r := e.keyed(t, webtest.TokA, "/api/flows/"+id+"/cancel", "", "k-cancel"); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	if n := e.Count(t, `select count(*) from api_idempotency_keys where flow_id = $1`, id); n != 1 {
		t.Fatalf("%d answers kept for the flow", n)
	}
	if r := e.Call(t, "DELETE", "/api/flows/"+id, webtest.TokA, ""); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if n := e.Count(t, `select count(*) from api_idempotency_keys`); n != 0 {
		t.Fatalf("%d answers outlived the flow", n)
	}
	if r := e.keyed(t, webtest.TokA, "/api/flows/"+id+"/cancel", "", "k-cancel"); r.Status != http.StatusNotFound {
		t.Fatalf("the key after the delete: %d %s", r.Status, r.Body)
	}
}
