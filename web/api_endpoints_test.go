package web

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// endpointOf decodes a webhook endpoint body.
func endpointOf(t *testing.T, r response) WebhookEndpoint {
	t.Helper()
	var e WebhookEndpoint
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("not an endpoint: %s", r.body)
	}
	return e
}

// audits returns the API's audit entries of action, "target detail" each.
func (e *apiEnv) audits(t *testing.T, action string) []string {
	t.Helper()
	rows, err := e.pool.Query(t.Context(), `select reference_id || ' ' || url from test_events
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
	r := e.call(t, "GET", "/api/webhook-endpoints", tokA, "")
	if r.status != 200 || string(r.body) != `{"has_more":false,"data":[]}`+"\n" && string(r.body) != `{"has_more":false,"data":[]}` {
		t.Fatalf("empty list: %d %s", r.status, r.body)
	}

	// Create: 201, Location, every member; defaults for those left out.
	r = e.call(t, "POST", "/api/webhook-endpoints", tokA,
		`{"url":" https://hooks.bank.example/flowd?k=secret ","description":"Decisions","eventTypes":["flow.rejected","flow.accepted"]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	a := endpointOf(t, r)
	if got := keysOf(r.json(t)); got != "createdAt,description,disabledAt,disabledReason,enabled,eventTypes,failingSince,id,updatedAt,url" {
		t.Errorf("members %s", got)
	}
	if a.URL != "https://hooks.bank.example/flowd?k=secret" || a.Description != "Decisions" || !a.Enabled || a.DisabledReason != nil ||
		!slices.Equal(a.EventTypes, []string{"flow.accepted", "flow.rejected"}) || r.header.Get("Location") != "/api/webhook-endpoints/"+a.ID {
		t.Fatalf("created %+v, Location %q", a, r.header.Get("Location"))
	}
	r = e.call(t, "POST", "/api/webhook-endpoints", tokA, `{"url":"https://audit.bank.example/","enabled":false}`)
	if r.status != http.StatusCreated {
		t.Fatalf("second create: %d %s", r.status, r.body)
	}
	b := endpointOf(t, r)
	if b.Enabled || len(b.EventTypes) != 0 || b.Description != "" || !strings.Contains(string(r.body), `"eventTypes":[]`) {
		t.Fatalf("second: %s", r.body)
	}

	// Get and list, newest first.
	if r = e.call(t, "GET", "/api/webhook-endpoints/"+a.ID, tokA, ""); r.status != 200 || endpointOf(t, r).URL != a.URL {
		t.Fatalf("get: %d %s", r.status, r.body)
	}
	r = e.call(t, "GET", "/api/webhook-endpoints", tokA, "")
	var list struct {
		HasMore bool              `json:"has_more"`
		Data    []WebhookEndpoint `json:"data"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 || list.HasMore || len(list.Data) != 2 ||
		list.Data[0].ID != b.ID || list.Data[1].ID != a.ID {
		t.Fatalf("list: %d %s", r.status, r.body)
	}

	// PATCH changes what it names.
	r = e.call(t, "PATCH", "/api/webhook-endpoints/"+a.ID, tokA, `{"enabled":false,"description":null}`)
	if u := endpointOf(t, r); r.status != 200 || u.Enabled || u.Description != "Decisions" || u.URL != a.URL || len(u.EventTypes) != 2 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	r = e.call(t, "PATCH", "/api/webhook-endpoints/"+a.ID, tokA, `{"url":"https://v2.bank.example/h","eventTypes":[],"enabled":true}`)
	if u := endpointOf(t, r); r.status != 200 || !u.Enabled || u.URL != "https://v2.bank.example/h" || len(u.EventTypes) != 0 {
		t.Fatalf("second patch: %d %s", r.status, r.body)
	}

	// Delete: 200, then 404.
	r = e.call(t, "DELETE", "/api/webhook-endpoints/"+b.ID, tokA, "")
	if r.status != 200 || string(r.body) != `{"status":"deleted","id":"`+b.ID+`"}`+"\n" && string(r.body) != `{"status":"deleted","id":"`+b.ID+`"}` {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r = e.call(t, m, "/api/webhook-endpoints/"+b.ID, tokA, ""); r.status != 404 {
			t.Errorf("%s after delete: %d %s", m, r.status, r.body)
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
	if n := e.count(t, `select count(*) from test_events where kind = 'audit' and (task_id <> 'client:client-a' or organization_id <> $1)`, orgA); n != 0 {
		t.Errorf("%d audit entries not by client-a of org-a", n)
	}
	if n := e.count(t, `select count(*) from test_events where url like '%secret%'`); n != 0 {
		t.Error("the audit log holds the URL's query")
	}
}

func TestWebhookEndpointsRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.call(t, "POST", "/api/webhook-endpoints", tokA, `{"url":"https://ok.example/"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
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
			r := e.call(t, tt.method, path, tokA, tt.body)
			if r.status != tt.status || !slices.Equal(r.fields(t), tt.fields) {
				t.Fatalf("%d %v, want %d %v: %s", r.status, r.fields(t), tt.status, tt.fields, r.body)
			}
		})
	}
	// None of it changed anything.
	if n := e.count(t, `select count(*) from webhook_endpoints`); n != 1 {
		t.Fatalf("%d endpoints", n)
	}
	if r := e.call(t, "GET", "/api/webhook-endpoints/"+id, tokA, ""); endpointOf(t, r).URL != "https://ok.example/" || len(endpointOf(t, r).EventTypes) != 0 {
		t.Fatalf("after the refusals: %s", r.body)
	}
	// A body that is not JSON is a 415; a malformed id a 404.
	if r := e.call(t, "POST", "/api/webhook-endpoints", tokA, `{"url":"https://h.example/"}`, "Content-Type", "text/plain"); r.status != 415 {
		t.Errorf("text/plain: %d", r.status)
	}
	for _, bad := range []string{"nope", "0b7e6f2a3c1d4e5f9a8b7c6d5e4f3a21", "00000000-0000-7000-8000-000000000000"} {
		if r := e.call(t, "GET", "/api/webhook-endpoints/"+bad, tokA, ""); r.status != 404 {
			t.Errorf("GET %s: %d", bad, r.status)
		}
		if r := e.call(t, "PATCH", "/api/webhook-endpoints/"+bad, tokA, `{"enabled":false}`); r.status != 404 {
			t.Errorf("PATCH %s: %d", bad, r.status)
		}
	}
}

func TestWebhookEndpointsNeedTheirScopeAndOrganization(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.call(t, "POST", "/api/webhook-endpoints", tokA, `{"url":"https://a.example/"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
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
		if r := e.call(t, op.method, op.path, "", op.body); r.status != 401 {
			t.Errorf("%s %s without a token: %d", op.method, op.path, r.status)
		}
		for _, tok := range []string{tokARead, tokAWrite, tokADelete} {
			r := e.call(t, op.method, op.path, tok, op.body)
			if r.status != 403 || !strings.Contains(r.header.Get("WWW-Authenticate"), `scope="webhooks:manage"`) {
				t.Errorf("%s %s with %s: %d %q", op.method, op.path, tok, r.status, r.header.Get("WWW-Authenticate"))
			}
		}
		// Another organization's endpoint does not exist for it.
		if strings.Contains(op.path, id) {
			if r := e.call(t, op.method, op.path, tokB, op.body); r.status != 404 {
				t.Errorf("%s %s with another organization's token: %d %s", op.method, op.path, r.status, r.body)
			}
		}
	}
	if r := e.call(t, "GET", "/api/webhook-endpoints", tokB, ""); r.status != 200 || strings.Contains(string(r.body), id) {
		t.Errorf("another organization's list: %d %s", r.status, r.body)
	}
	// Nothing changed.
	if r := e.call(t, "GET", "/api/webhook-endpoints/"+id, tokA, ""); r.status != 200 || !endpointOf(t, r).Enabled {
		t.Fatalf("after the refusals: %d %s", r.status, r.body)
	}
	if n := e.count(t, `select count(*) from webhook_endpoints`); n != 1 {
		t.Fatalf("%d endpoints", n)
	}
	if n := e.count(t, `select count(*) from test_events where kind = 'audit'`); n != 1 {
		t.Fatalf("%d audit entries, want only the create", n)
	}
}

func TestAnOrganizationsHundredFirstEndpointIsAConflict(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	if _, err := e.pool.Exec(t.Context(), `insert into webhook_endpoints (organization_id, id, url)
		select $1, gen_random_uuid(), 'https://many.example/' || n from generate_series(1, 100) n`, orgA); err != nil {
		t.Fatal(err)
	}
	r := e.call(t, "POST", "/api/webhook-endpoints", tokA, `{"url":"https://one-more.example/"}`)
	if r.status != 409 || !strings.Contains(string(r.body), "100 webhook endpoints") {
		t.Fatalf("101st: %d %s", r.status, r.body)
	}
	if r := e.call(t, "GET", "/api/webhook-endpoints", tokA, ""); r.status != 200 || strings.Count(string(r.body), `"id"`) != 100 {
		t.Fatalf("list of 100: %d", r.status)
	}
	// Another organization is not held to it.
	if r := e.call(t, "POST", "/api/webhook-endpoints", tokB, `{"url":"https://one-more.example/"}`); r.status != 201 {
		t.Fatalf("another organization: %d %s", r.status, r.body)
	}
}
