package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/web/api"
	"github.com/flowd/flowd/web/internal/webtest"
)

// endpointOf decodes a webhook endpoint body.
func endpointOf(t *testing.T, r webtest.Response) api.WebhookEndpoint {
	t.Helper()
	var e api.WebhookEndpoint
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Fatalf("not an endpoint: %s", r.Body)
	}
	return e
}

// audits returns the API's audit entries of action, "target detail" each.
func (e *apiEnv) audits(t *testing.T, action string) []string {
	t.Helper()
	rows, err := e.Pool.Query(t.Context(), `select reference_id || ' ' || url from test_events
		where kind = 'audit' and status = $1 order by id`, action)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestWebhookEndpointsAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t)

	// None at first.
	r := e.Call(t, "GET", "/api/webhook-endpoints", webtest.TokA, "")
	if r.Status != 200 || string(r.Body) != `{"has_more":false,"data":[]}`+"\n" && string(r.Body) != `{"has_more":false,"data":[]}` {
		t.Fatalf("empty list: %d %s", r.Status, r.Body)
	}

	// Create: 201, Location, every member; defaults for those left out.
	r = e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA,
		`{"url":" https://hooks.bank.example/flowd?k=secret ","description":"Decisions","eventTypes":["flow.rejected","flow.accepted"]}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	a := endpointOf(t, r)
	if got := webtest.KeysOf(r.JSON(t)); got != "createdAt,description,disabledAt,disabledReason,enabled,eventTypes,failingSince,id,ordering,payload,rateLimit,signing,updatedAt,url" {
		t.Errorf("members %s", got)
	}
	if a.URL != "https://hooks.bank.example/flowd?k=secret" || a.Description != "Decisions" || !a.Enabled || a.DisabledReason != nil ||
		!slices.Equal(a.EventTypes, []string{"flow.accepted", "flow.rejected"}) || r.Header.Get("Location") != "/api/webhook-endpoints/"+a.ID {
		t.Fatalf("created %+v, Location %q", a, r.Header.Get("Location"))
	}
	r = e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://audit.bank.example/","enabled":false}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("second create: %d %s", r.Status, r.Body)
	}
	b := endpointOf(t, r)
	if b.Enabled || len(b.EventTypes) != 0 || b.Description != "" || !strings.Contains(string(r.Body), `"eventTypes":[]`) {
		t.Fatalf("second: %s", r.Body)
	}

	// Get and list, newest first.
	if r = e.Call(t, "GET", "/api/webhook-endpoints/"+a.ID, webtest.TokA, ""); r.Status != 200 || endpointOf(t, r).URL != a.URL {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	r = e.Call(t, "GET", "/api/webhook-endpoints", webtest.TokA, "")
	var list struct {
		HasMore bool                  `json:"has_more"`
		Data    []api.WebhookEndpoint `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || r.Status != 200 || list.HasMore || len(list.Data) != 2 ||
		list.Data[0].ID != b.ID || list.Data[1].ID != a.ID {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}

	// PATCH changes what it names.
	r = e.Call(t, "PATCH", "/api/webhook-endpoints/"+a.ID, webtest.TokA, `{"enabled":false,"description":null}`)
	if u := endpointOf(t, r); r.Status != 200 || u.Enabled || u.Description != "Decisions" || u.URL != a.URL || len(u.EventTypes) != 2 {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	r = e.Call(t, "PATCH", "/api/webhook-endpoints/"+a.ID, webtest.TokA, `{"url":"https://v2.bank.example/h","eventTypes":[],"enabled":true}`)
	if u := endpointOf(t, r); r.Status != 200 || !u.Enabled || u.URL != "https://v2.bank.example/h" || len(u.EventTypes) != 0 {
		t.Fatalf("second patch: %d %s", r.Status, r.Body)
	}

	// Delete: 200, then 404.
	r = e.Call(t, "DELETE", "/api/webhook-endpoints/"+b.ID, webtest.TokA, "")
	if r.Status != 200 || string(r.Body) != `{"status":"deleted","id":"`+b.ID+`"}`+"\n" && string(r.Body) != `{"status":"deleted","id":"`+b.ID+`"}` {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r = e.Call(t, m, "/api/webhook-endpoints/"+b.ID, webtest.TokA, ""); r.Status != 404 {
			t.Errorf("%s after delete: %d %s", m, r.Status, r.Body)
		}
	}

	// Every write is in the audit log, by the client, naming the endpoint
	// and its origin, never the URL's path or query.
	for action, want := range map[string][]string{
		"webhook_endpoint.create": {a.ID + " https://hooks.bank.example; flow.accepted flow.rejected; enabled", b.ID + " https://audit.bank.example; all events; disabled"},
		"webhook_endpoint.update": {a.ID + " disabled: https://hooks.bank.example; flow.accepted flow.rejected; disabled",
			a.ID + " url, eventTypes, enabled: https://v2.bank.example; all events; enabled"},
		"webhook_endpoint.delete": {b.ID + " https://audit.bank.example; all events; disabled"},
	} {
		if got := e.audits(t, action); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", action, got, want)
		}
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'audit' and (task_id <> 'client:client-a' or organization_id <> $1)`, webtest.OrgA); n != 0 {
		t.Errorf("%d audit entries not by client-a of org-a", n)
	}
	if n := e.Count(t, `select count(*) from test_events where url like '%secret%'`); n != 0 {
		t.Error("the audit log holds the URL's query")
	}
}

func TestWebhookEndpointsRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://ok.example/"}`)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := endpointOf(t, r).ID

	tests := []struct {
		name, method, body string
		status             int
		fields             []string
	}{
		{"no url", "POST", `{}`, 400, []string{"url"}},
		{"http", "POST", `{"url":"http://hooks.example/"}`, 400, []string{"url"}},
		{"user info", "POST", `{"url":"https://me:pw@hooks.example/"}`, 400, []string{"url"}},
		{"loopback", "POST", `{"url":"https://127.0.0.1/"}`, 400, []string{"url"}},
		{"metadata service", "POST", `{"url":"https://169.254.169.254/latest/meta-data"}`, 400, []string{"url"}},
		{"private v6", "POST", `{"url":"https://[fd00::1]/"}`, 400, []string{"url"}},
		{"too long", "POST", `{"url":"https://h.example/` + strings.Repeat("a", 2048) + `"}`, 400, []string{"url"}},
		{"unknown types", "POST", `{"url":"https://h.example/","eventTypes":["flow.accepted","flow.nope","FLOW.CREATED"]}`, 400,
			[]string{"eventTypes[1]", "eventTypes[2]"}},
		{"description", "POST", `{"url":"https://h.example/","description":"` + strings.Repeat("d", 201) + `"}`, 400, []string{"description"}},
		{"control character", "POST", `{"url":"https://h.example/","description":"a\u0000b"}`, 400, []string{"description"}},
		{"every field at once", "POST", `{"url":"ftp://h.example/","description":"a\tb","eventTypes":["x"]}`, 400,
			[]string{"url", "description", "eventTypes[0]"}},
		{"wrong types and bad values together", "POST", `{"url":"http://10.0.0.1/","enabled":"yes","eventTypes":"flow.created","extra":1}`, 400,
			[]string{"enabled", "eventTypes", "extra", "url"}},
		{"not JSON", "POST", `url=https://h.example/`, 400, []string{""}},
		{"patch: bad url", "PATCH", `{"url":"https://[::1]/"}`, 400, []string{"url"}},
		{"patch: unknown type", "PATCH", `{"eventTypes":["flow.accepted","flow.accepted","nope"]}`, 400, []string{"eventTypes[2]"}},
		{"patch: unknown member", "PATCH", `{"id":"x"}`, 400, []string{"id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/api/webhook-endpoints"
			if tt.method == "PATCH" {
				path += "/" + id
			}
			r := e.Call(t, tt.method, path, webtest.TokA, tt.body)
			if r.Status != tt.status || !slices.Equal(r.Fields(t), tt.fields) {
				t.Fatalf("%d %v, want %d %v: %s", r.Status, r.Fields(t), tt.status, tt.fields, r.Body)
			}
		})
	}
	// None of it changed anything.
	if n := e.Count(t, `select count(*) from webhook_endpoints`); n != 1 {
		t.Fatalf("%d endpoints", n)
	}
	if r := e.Call(t, "GET", "/api/webhook-endpoints/"+id, webtest.TokA, ""); endpointOf(t, r).URL != "https://ok.example/" || len(endpointOf(t, r).EventTypes) != 0 {
		t.Fatalf("after the refusals: %s", r.Body)
	}
	// A body that is not JSON is a 415; a malformed id a 404.
	if r := e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://h.example/"}`, "Content-Type", "text/plain"); r.Status != 415 {
		t.Errorf("text/plain: %d", r.Status)
	}
	for _, bad := range []string{"nope", "0b7e6f2a3c1d4e5f9a8b7c6d5e4f3a21", "00000000-0000-7000-8000-000000000000"} {
		if r := e.Call(t, "GET", "/api/webhook-endpoints/"+bad, webtest.TokA, ""); r.Status != 404 {
			t.Errorf("GET %s: %d", bad, r.Status)
		}
		if r := e.Call(t, "PATCH", "/api/webhook-endpoints/"+bad, webtest.TokA, `{"enabled":false}`); r.Status != 404 {
			t.Errorf("PATCH %s: %d", bad, r.Status)
		}
	}
}

func TestWebhookEndpointsNeedTheirScopeAndOrganization(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://a.example/"}`)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := endpointOf(t, r).ID
	ops := []struct{ method, path, body string }{
		{"GET", "/api/webhook-endpoints", ""},
		{"POST", "/api/webhook-endpoints", `{"url":"https://b.example/"}`},
		{"GET", "/api/webhook-endpoints/" + id, ""},
		{"PATCH", "/api/webhook-endpoints/" + id, `{"enabled":false}`},
		{"DELETE", "/api/webhook-endpoints/" + id, ""},
	}
	for _, op := range ops {
		// No token, and tokens without webhooks:manage.
		if r := e.Call(t, op.method, op.path, "", op.body); r.Status != 401 {
			t.Errorf("%s %s without a token: %d", op.method, op.path, r.Status)
		}
		for _, tok := range []string{webtest.TokARead, webtest.TokAWrite, webtest.TokADelete} {
			r := e.Call(t, op.method, op.path, tok, op.body)
			if r.Status != 403 || !strings.Contains(r.Header.Get("WWW-Authenticate"), `scope="webhooks:manage"`) {
				t.Errorf("%s %s with %s: %d %q", op.method, op.path, tok, r.Status, r.Header.Get("WWW-Authenticate"))
			}
		}
		// Another organization's endpoint does not exist for it.
		if strings.Contains(op.path, id) {
			if r := e.Call(t, op.method, op.path, webtest.TokB, op.body); r.Status != 404 {
				t.Errorf("%s %s with another organization's token: %d %s", op.method, op.path, r.Status, r.Body)
			}
		}
	}
	if r := e.Call(t, "GET", "/api/webhook-endpoints", webtest.TokB, ""); r.Status != 200 || strings.Contains(string(r.Body), id) {
		t.Errorf("another organization's list: %d %s", r.Status, r.Body)
	}
	// Nothing changed.
	if r := e.Call(t, "GET", "/api/webhook-endpoints/"+id, webtest.TokA, ""); r.Status != 200 || !endpointOf(t, r).Enabled {
		t.Fatalf("after the refusals: %d %s", r.Status, r.Body)
	}
	if n := e.Count(t, `select count(*) from webhook_endpoints`); n != 1 {
		t.Fatalf("%d endpoints", n)
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'audit'`); n != 1 {
		t.Fatalf("%d audit entries, want only the create", n)
	}
}

func TestAnOrganizationsHundredFirstEndpointIsAConflict(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	if _, err := e.Pool.Exec(t.Context(), `insert into webhook_endpoints (organization_id, id, url)
		select $1, gen_random_uuid(), 'https://many.example/' || n from generate_series(1, 100) n`, webtest.OrgA); err != nil {
		t.Fatal(err)
	}
	r := e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://one-more.example/"}`)
	if r.Status != 409 || !strings.Contains(string(r.Body), "100 webhook endpoints") {
		t.Fatalf("101st: %d %s", r.Status, r.Body)
	}
	if r := e.Call(t, "GET", "/api/webhook-endpoints", webtest.TokA, ""); r.Status != 200 || strings.Count(string(r.Body), `"id"`) != 100 {
		t.Fatalf("list of 100: %d", r.Status)
	}
	// Another organization is not held to it.
	if r := e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokB, `{"url":"https://one-more.example/"}`); r.Status != 201 {
		t.Fatalf("another organization: %d %s", r.Status, r.Body)
	}
}

// TestWebhookEndpointOrderingAndRateLimit: an endpoint is unordered and
// unthrottled unless asked; POST and PATCH set per-flow ordering and a rate
// limit, a PATCH with rateLimit 0 removes it, and values out of range are a
// 400 naming the field that changes nothing.
func TestWebhookEndpointOrderingAndRateLimit(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA, `{"url":"https://hooks.bank.example/plain"}`)
	if r.Status != http.StatusCreated || !strings.Contains(string(r.Body), `"ordering":"none"`) || !strings.Contains(string(r.Body), `"rateLimit":null`) {
		t.Fatalf("defaults: %d %s", r.Status, r.Body)
	}
	r = e.Call(t, "POST", "/api/webhook-endpoints", webtest.TokA,
		`{"url":"https://hooks.bank.example/ordered","ordering":"per-flow","rateLimit":20}`)
	a := endpointOf(t, r)
	if r.Status != http.StatusCreated || a.Ordering != "per-flow" || a.RateLimit == nil || *a.RateLimit != 20 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	for body, field := range map[string]string{`{"ordering":"strict"}`: "ordering", `{"rateLimit":1001}`: "rateLimit",
		`{"rateLimit":-1}`: "rateLimit"} {
		r = e.Call(t, "PATCH", "/api/webhook-endpoints/"+a.ID, webtest.TokA, body)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"`+field+`"`) {
			t.Errorf("PATCH %s: %d %s", body, r.Status, r.Body)
		}
	}
	r = e.Call(t, "PATCH", "/api/webhook-endpoints/"+a.ID, webtest.TokA, `{"description":"kept"}`)
	if got := endpointOf(t, r); r.Status != 200 || got.Ordering != "per-flow" || got.RateLimit == nil || *got.RateLimit != 20 {
		t.Fatalf("a PATCH of another member changed them: %d %s", r.Status, r.Body)
	}
	r = e.Call(t, "PATCH", "/api/webhook-endpoints/"+a.ID, webtest.TokA, `{"ordering":"none","rateLimit":0}`)
	if got := endpointOf(t, r); r.Status != 200 || got.Ordering != "none" || got.RateLimit != nil {
		t.Fatalf("turned off: %d %s", r.Status, r.Body)
	}
	if r = e.Call(t, "GET", "/api/webhook-endpoints/"+a.ID, webtest.TokA, ""); !strings.Contains(string(r.Body), `"ordering":"none"`) ||
		!strings.Contains(string(r.Body), `"rateLimit":null`) {
		t.Fatalf("get: %s", r.Body)
	}
}
