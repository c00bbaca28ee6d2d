package api_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/taskreports"
	"github.com/flowd/flowd/web/internal/webtest"
)

// strongTag is an entity tag as flowd writes them: strong, in quotes.
var strongTag = regexp.MustCompile(`^"[\x21\x23-\x7e]+"$`)

// tagOf retrieves path and returns its ETag and body, failing unless the
// answer is 200 with a strong ETag.
func (e *apiEnv) tagOf(t *testing.T, path string) (string, string) {
	t.Helper()
	r := e.Call(t, "GET", path, webtest.TokA, "")
	tag := r.Header.Get("ETag")
	if r.Status != http.StatusOK || !strongTag.MatchString(tag) {
		t.Fatalf("GET %s: %d, ETag %q: %s", path, r.Status, tag, r.Body)
	}
	return tag, string(r.Body)
}

// TestEverySingleResourceAnswerCarriesAnETag walks the real router: every
// GET of the API that names one resource answers with a strong ETag that is
// the same while the resource is, and 304 to an If-None-Match naming it. A
// new route of one resource fails here until it is in the table.
func TestEverySingleResourceAnswerCarriesAnETag(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithWebhooks())
	ctx := context.Background()
	flowID := e.Create(t, webtest.TokA, nil)
	e.decideWithEvidence(t, flowID, true)
	attachment := e.Call(t, "GET", "/api/flows/"+flowID+"/attachments", webtest.TokA, "").JSON(t)["data"].([]any)[0].(map[string]any)["id"].(string)
	event := e.Call(t, "GET", "/api/events?flowId="+flowID, webtest.TokA, "").JSON(t)["data"].([]any)[0].(map[string]any)["id"].(string)
	endpoint := endpointOf(t, e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://hooks.bank.example/flowd","enabled":false}`)).ID
	const recovery = "019ab3d0-4c5d-7e6f-8a9b-0c1d2e3f4a5b"
	if _, err := e.Pool.Exec(ctx, `insert into webhook_recoveries (organization_id, id, endpoint_id, since, state, total, scheduled, requested_by)
		values ($1, $2, $3, now() - interval '1 day', 'done', 3, 3, 'client:client-a')`, webtest.OrgA, recovery, endpoint); err != nil {
		t.Fatal(err)
	}
	const flowURLRecovery = "019ab3d0-4c5d-7e6f-8a9b-0c1d2e3f4a5c"
	if _, err := e.Pool.Exec(ctx, `insert into webhook_recoveries (organization_id, id, endpoint_id, since, state, total, scheduled, requested_by)
		values ($1, $2, null, now() - interval '1 day', 'done', 2, 2, 'client:client-a')`, webtest.OrgA, flowURLRecovery); err != nil {
		t.Fatal(err)
	}
	erasure := e.Call(t, "POST", "/api/erasures", webtest.TokA, `{"nationalId":"ID-77777"}`).JSON(t)["id"].(string)
	resources := map[string]string{
		"/api/erasures/:id":                                 "/api/erasures/" + erasure,
		"/api/webhook-recoveries/:recoveryId":               "/api/webhook-recoveries/" + flowURLRecovery,
		"/api/flows/:id":                                    "/api/flows/" + flowID,
		"/api/events/:id":                                   "/api/events/" + event,
		"/api/flow-definitions/:id":                         "/api/flow-definitions/consent",
		"/api/webhook-endpoints/:id":                        "/api/webhook-endpoints/" + endpoint,
		"/api/flows/:id/attachments/:attachmentId":          "/api/flows/" + flowID + "/attachments/" + attachment,
		"/api/flow-definitions/:id/versions/:version":       "/api/flow-definitions/consent/versions/1",
		"/api/webhook-endpoints/:id/recoveries/:recoveryId": "/api/webhook-endpoints/" + endpoint + "/recoveries/" + recovery,
	}
	routed := 0
	for _, route := range e.Srv.Echo().Routes() {
		if route.Method != http.MethodGet || !strings.HasPrefix(route.Path, "/api/") ||
			!strings.HasPrefix(route.Path[strings.LastIndexByte(route.Path, '/')+1:], ":") {
			continue
		}
		routed++
		path, ok := resources[route.Path]
		if !ok {
			t.Errorf("GET %s answers one resource: add it to this test, with its ETag", route.Path)
			continue
		}
		t.Run(route.Path, func(t *testing.T) {
			tag, body := e.tagOf(t, path)
			if again, againBody := e.tagOf(t, path); again != tag || againBody != body {
				t.Fatalf("a second read: ETag %s, then %s", tag, again)
			}
			for _, current := range []string{tag, `W/` + tag, `"other", ` + tag, `*`} {
				r := e.Call(t, "GET", path, webtest.TokA, "", "If-None-Match", current)
				if r.Status != http.StatusNotModified || len(r.Body) != 0 || r.Header.Get("ETag") != tag {
					t.Errorf("If-None-Match: %s: %d, ETag %q, body %q; want 304 without a body", current, r.Status, r.Header.Get("ETag"), r.Body)
				}
			}
			if r := e.Call(t, "GET", path, webtest.TokA, "", "If-None-Match", `"other"`); r.Status != http.StatusOK || string(r.Body) != body {
				t.Errorf("If-None-Match of another copy: %d %s", r.Status, r.Body)
			}
		})
	}
	if routed != len(resources) {
		t.Errorf("%d GET routes of one resource, %d in the table", routed, len(resources))
	}
}

// TestAFlowsETagChangesWithEveryChange: each kind of change of a flow (the
// link opened, an incident opened and resolved, the decision with its
// receipt, a withdrawal, a cancellation, an acceptance expiring) gives it an
// ETag it never had, and a copy read before answers 200 to If-None-Match.
func TestAFlowsETagChangesWithEveryChange(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	seen := map[string]map[string]string{} // path → ETag → the change after which it was read
	last := map[string]string{}            // path → its latest ETag
	changed := func(what, path string) {
		t.Helper()
		tag, _ := e.tagOf(t, path)
		if seen[path] == nil {
			seen[path] = map[string]string{}
		}
		if earlier, ok := seen[path][tag]; ok {
			t.Fatalf("after %s the ETag is %s, as after %s", what, tag, earlier)
		}
		if before, ok := last[path]; ok {
			if r := e.Call(t, "GET", path, webtest.TokA, "", "If-None-Match", before); r.Status != http.StatusOK {
				t.Fatalf("after %s, If-None-Match of the copy before: %d", what, r.Status)
			}
		}
		seen[path][tag], last[path] = what, tag
	}
	inTx := func(fn func(tx database.Tx) error) {
		t.Helper()
		if err := database.WithTx(ctx, e.Pool, fn); err != nil {
			t.Fatal(err)
		}
	}

	id := e.Create(t, webtest.TokA, map[string]any{"webhookUrl": "https://hooks.example/h"})
	path := "/api/flows/" + id
	changed("create", path)
	inTx(func(tx database.Tx) error { _, err := e.Flows.MarkOpenedTx(ctx, tx, webtest.OrgA, id); return err })
	changed("opening", path)
	var task string
	if err := e.Pool.QueryRow(ctx, `select task_id from test_events where flow_id = $1 and kind = 'flow.created'`, id).Scan(&task); err != nil {
		t.Fatal(err)
	}
	reports := taskreports.New(e.Pool)
	if err := reports.TaskFailing(ctx, webtest.OrgA, task, "hooks.example: 502 Bad Gateway"); err != nil {
		t.Fatal(err)
	}
	changed("an incident", path)
	if err := reports.TaskSucceeded(ctx, webtest.OrgA, task); err != nil {
		t.Fatal(err)
	}
	changed("the incident resolved", path)
	e.decideWithEvidence(t, id, true)
	changed("the acceptance and its receipt", path)
	r := e.Call(t, "POST", path+"/withdraw", webtest.TokA, `{"reason":"By phone."}`)
	if r.Status != http.StatusOK {
		t.Fatalf("withdraw: %d %s", r.Status, r.Body)
	}
	changed("the withdrawal", path)
	if tag := r.Header.Get("ETag"); tag != last[path] {
		t.Fatalf("the withdrawal answered ETag %s, a retrieve after it %s", tag, last[path])
	}

	cancelled := e.Create(t, webtest.TokA, nil)
	changed("create", "/api/flows/"+cancelled)
	r = e.Call(t, "POST", "/api/flows/"+cancelled+"/cancel", webtest.TokA, "")
	changed("the cancellation", "/api/flows/"+cancelled)
	if tag := r.Header.Get("ETag"); r.Status != http.StatusOK || tag != last["/api/flows/"+cancelled] {
		t.Fatalf("cancel: %d, ETag %s, a retrieve after it %s", r.Status, tag, last["/api/flows/"+cancelled])
	}

	expiring := e.Create(t, webtest.TokA, map[string]any{"flowDefinitionId": e.validFor90Days(t)})
	e.decideWithEvidence(t, expiring, true)
	changed("an acceptance", "/api/flows/"+expiring)
	if _, err := e.Pool.Exec(ctx, `update flows set valid_until = now() - interval '1 second' where id = $1`, expiring); err != nil {
		t.Fatal(err)
	}
	if n, err := e.Flows.ExpireDueAcceptances(ctx, 10); n != 1 || err != nil {
		t.Fatalf("expiry: %d, %v", n, err)
	}
	changed("the acceptance expiring", "/api/flows/"+expiring)
}

// TestADefinitionsETagChangesWithEveryChange: publishing a version changes
// the ETag of the latest and of every earlier version (their latestVersion
// changes); retiring changes both again.
func TestADefinitionsETagChangesWithEveryChange(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "mortgage"}))
	created := r.Header.Get("ETag")
	latest, first := "/api/flow-definitions/mortgage", "/api/flow-definitions/mortgage/versions/1"
	tags := func() (string, string) {
		a, _ := e.tagOf(t, latest)
		b, _ := e.tagOf(t, first)
		return a, b
	}
	l1, f1 := tags()
	if r.Status != http.StatusCreated || created != l1 || l1 != f1 {
		t.Fatalf("create: %d, ETag %s; latest %s, version 1 %s", r.Status, created, l1, f1)
	}
	if r := e.Call(t, "POST", latest+"/versions", webtest.TokA, draftBody(nil)); r.Status != http.StatusCreated {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	l2, f2 := tags()
	if l2 == l1 || f2 == f1 || l2 == f2 {
		t.Fatalf("after publishing version 2: latest %s (was %s), version 1 %s (was %s)", l2, l1, f2, f1)
	}
	r = e.Call(t, "POST", latest+"/retire", webtest.TokA, "")
	l3, f3 := tags()
	if r.Status != http.StatusOK || r.Header.Get("ETag") != l3 || l3 == l2 || f3 == f2 {
		t.Fatalf("retire: %d, ETag %s; latest %s (was %s), version 1 %s (was %s)", r.Status, r.Header.Get("ETag"), l3, l2, f3, f2)
	}
}

// TestIfMatchGuardsEveryConditionalWrite: for each write that honours
// If-Match, the ETag read before another change answers 412 and changes
// nothing (the same body, no event, no audit entry), and the current one
// succeeds.
func TestIfMatchGuardsEveryConditionalWrite(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	ctx := context.Background()
	open := func(id string) func() {
		return func() {
			if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) error {
				_, err := e.Flows.MarkOpenedTx(ctx, tx, webtest.OrgA, id)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	patch := func(id string) func() {
		return func() {
			if r := e.Call(t, "PATCH", "/api/webhook-endpoints/"+id, webtest.TokA, `{"description":"another tool"}`); r.Status != http.StatusOK {
				t.Fatalf("the other tool's update: %d %s", r.Status, r.Body)
			}
		}
	}
	newEndpoint := func() string {
		return endpointOf(t, e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://hooks.bank.example/flowd"}`)).ID
	}
	accepted := e.Create(t, webtest.TokA, map[string]any{"webhookUrl": "https://hooks.example/h"})
	e.decideWithEvidence(t, accepted, true)
	var task string
	if err := e.Pool.QueryRow(ctx, `select task_id from test_events where flow_id = $1 and kind = 'flow.created'`, accepted).Scan(&task); err != nil {
		t.Fatal(err)
	}
	if r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "mortgage"})); r.Status != http.StatusCreated {
		t.Fatalf("definition: %d %s", r.Status, r.Body)
	}
	cancelled, deleted := e.Create(t, webtest.TokA, nil), e.Create(t, webtest.TokA, nil)
	patched, removed := newEndpoint(), newEndpoint()

	for _, c := range []struct {
		name, resource, method, path, body string
		// interfere is another client's change after the read.
		interfere func()
		status    int
		gone      bool // the write removes the resource
	}{
		{"cancel", "/api/flows/" + cancelled, "POST", "/api/flows/" + cancelled + "/cancel", "", open(cancelled), http.StatusOK, false},
		{"withdraw", "/api/flows/" + accepted, "POST", "/api/flows/" + accepted + "/withdraw", `{"reason":"By phone."}`, func() {
			if err := taskreports.New(e.Pool).TaskFailing(ctx, webtest.OrgA, task, "hooks.example: 502 Bad Gateway"); err != nil {
				t.Fatal(err)
			}
		}, http.StatusOK, false},
		{"delete a flow", "/api/flows/" + deleted, "DELETE", "/api/flows/" + deleted, "", open(deleted), http.StatusOK, true},
		{"update an endpoint", "/api/webhook-endpoints/" + patched, "PATCH", "/api/webhook-endpoints/" + patched, `{"description":"mine"}`, patch(patched), http.StatusOK, false},
		{"delete an endpoint", "/api/webhook-endpoints/" + removed, "DELETE", "/api/webhook-endpoints/" + removed, "", patch(removed), http.StatusOK, true},
		{"retire a definition", "/api/flow-definitions/mortgage", "POST", "/api/flow-definitions/mortgage/retire", "", func() {
			if r := e.Call(t, "POST", "/api/flow-definitions/mortgage/versions", webtest.TokA, draftBody(nil)); r.Status != http.StatusCreated {
				t.Fatalf("the other tool's publish: %d %s", r.Status, r.Body)
			}
		}, http.StatusOK, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			read, _ := e.tagOf(t, c.resource)
			c.interfere()
			tag, body := e.tagOf(t, c.resource)
			if tag == read {
				t.Fatalf("the other change left the ETag %s", tag)
			}
			before := e.Count(t, `select count(*) from test_events`)
			r := e.Call(t, c.method, c.path, webtest.TokA, c.body, "If-Match", read)
			if r.Status != http.StatusPreconditionFailed || !strings.Contains(string(r.Body), "/docs#problem-precondition-failed") {
				t.Fatalf("with the ETag read before: %d %s, want 412 precondition-failed", r.Status, r.Body)
			}
			if now, nowBody := e.tagOf(t, c.resource); now != tag || nowBody != body {
				t.Fatalf("a refused write changed the resource: ETag %s, was %s\n%s\nwas\n%s", now, tag, nowBody, body)
			}
			if after := e.Count(t, `select count(*) from test_events`); after != before {
				t.Fatalf("a refused write left %d events or audit entries", after-before)
			}
			r = e.Call(t, c.method, c.path, webtest.TokA, c.body, "If-Match", tag)
			if r.Status != c.status {
				t.Fatalf("with the current ETag: %d %s", r.Status, r.Body)
			}
			if c.gone {
				if got := e.Call(t, "GET", c.resource, webtest.TokA, ""); got.Status != http.StatusNotFound {
					t.Fatalf("after the write: %d", got.Status)
				}
				return
			}
			if now, _ := e.tagOf(t, c.resource); now == tag || r.Header.Get("ETag") != now {
				t.Fatalf("the write answered ETag %q; the resource's is %s, was %s", r.Header.Get("ETag"), now, tag)
			}
		})
	}
}

// TestIfMatchForms: "*", a list, a weak tag, a header that is no list of
// tags, and a resource that does not exist.
func TestIfMatchForms(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := endpointOf(t, e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://hooks.bank.example/flowd"}`)).ID
	path := "/api/webhook-endpoints/" + id
	patch := func(ifMatch string) webtest.Response {
		return e.Call(t, "PATCH", path, webtest.TokA, `{"description":"mine"}`, "If-Match", ifMatch)
	}
	tag, _ := e.tagOf(t, path)
	if r := patch(`W/` + tag); r.Status != http.StatusPreconditionFailed {
		t.Fatalf("a weak tag: %d %s, want 412 (compared strongly)", r.Status, r.Body)
	}
	if r := patch(`"v0", ` + tag); r.Status != http.StatusOK {
		t.Fatalf("a list with the current tag: %d %s", r.Status, r.Body)
	}
	if r := patch(`*`); r.Status != http.StatusOK {
		t.Fatalf("*: %d %s", r.Status, r.Body)
	}
	for _, bad := range []string{`v3`, `"v3`, `"v3" "v4"`} {
		r := patch(bad)
		if fields := r.Fields(t); r.Status != http.StatusBadRequest || len(fields) != 1 || fields[0] != "If-Match" {
			t.Errorf("If-Match: %s: %d %s, want 400 naming If-Match", bad, r.Status, r.Body)
		}
	}
	if r := e.Call(t, "DELETE", "/api/webhook-endpoints/019ab3c6-4444-7f80-9a1b-2c3d4e5f6a7d", webtest.TokA, "", "If-Match", `*`); r.Status != http.StatusNotFound {
		t.Fatalf("an unknown endpoint with If-Match: *: %d, want 404", r.Status)
	}
	if r := e.Call(t, "DELETE", "/api/flows/019ab3c6-4444-7f80-9a1b-2c3d4e5f6a7d", webtest.TokA, "", "If-Match", `"v1"`); r.Status != http.StatusNotFound {
		t.Fatalf("an unknown flow with If-Match: %d, want 404", r.Status)
	}
	if r := e.Call(t, "GET", path, webtest.TokB, "", "If-None-Match", `*`); r.Status != http.StatusNotFound {
		t.Fatalf("another organization's endpoint with If-None-Match: *: %d, want 404", r.Status)
	}
}

// TestConcurrentWritesWithOneIfMatchOneWins: concurrent writes that each name
// the ETag they read are applied one after the other, so exactly one finds
// it current; the others answer 412 and change nothing.
func TestConcurrentWritesWithOneIfMatchOneWins(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	const n = 8
	endpoint := endpointOf(t, e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://hooks.bank.example/flowd"}`)).ID
	flowIDs := []string{e.Create(t, webtest.TokA, nil), e.Create(t, webtest.TokA, nil)}
	for _, c := range []struct {
		name, resource string
		write          func(i int, tag string) webtest.Response
		// effects counts the changes' events or audit entries.
		effects string
	}{
		{"updates of an endpoint", "/api/webhook-endpoints/" + endpoint, func(i int, tag string) webtest.Response {
			return e.Call(t, "PATCH", "/api/webhook-endpoints/"+endpoint, webtest.TokA, `{"description":"tool `+string(rune('a'+i))+`"}`, "If-Match", tag)
		}, `select count(*) from test_events where kind = 'audit'`},
		{"cancellations of a flow", "/api/flows/" + flowIDs[0], func(_ int, tag string) webtest.Response {
			return e.Call(t, "POST", "/api/flows/"+flowIDs[0]+"/cancel", webtest.TokA, "", "If-Match", tag)
		}, `select count(*) from test_events where kind = 'flow.cancelled'`},
		{"deletions and cancellations of a flow", "/api/flows/" + flowIDs[1], func(i int, tag string) webtest.Response {
			if i%2 == 0 {
				return e.Call(t, "DELETE", "/api/flows/"+flowIDs[1], webtest.TokA, "", "If-Match", tag)
			}
			return e.Call(t, "POST", "/api/flows/"+flowIDs[1]+"/cancel", webtest.TokA, "", "If-Match", tag)
		}, `select count(*) from test_events where kind in ('flow.cancelled', 'flow.deleted') and flow_id = '` + flowIDs[1] + `'`},
	} {
		tag, _ := e.tagOf(t, c.resource)
		var mu sync.Mutex
		statuses := map[int]int{}
		var winner webtest.Response
		before := e.Count(t, c.effects)
		webtest.Parallel(n, n, func(i int) {
			r := c.write(i, tag)
			mu.Lock()
			defer mu.Unlock()
			statuses[r.Status]++
			if r.Status == http.StatusOK {
				winner = r
			}
		})
		if statuses[http.StatusOK] != 1 || statuses[http.StatusOK]+statuses[http.StatusPreconditionFailed]+statuses[http.StatusNotFound] != n {
			t.Errorf("%s: answers %v, want one 200 and the rest 412 (or 404 once deleted)", c.name, statuses)
			continue
		}
		// One change: its event or audit entry, and no other.
		if added := e.Count(t, c.effects) - before; added != 1 {
			t.Errorf("%s: %d events and audit entries, want the winner's one", c.name, added)
		}
		if c.name == "updates of an endpoint" {
			if got := endpointOf(t, e.Call(t, "GET", c.resource, webtest.TokA, "")); got.Description != endpointOf(t, winner).Description {
				t.Errorf("%s: the endpoint says %q, the winner wrote %q", c.name, got.Description, endpointOf(t, winner).Description)
			}
		}
	}
}
