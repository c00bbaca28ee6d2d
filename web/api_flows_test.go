package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/modules/flows"
)

var apiTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestCreateAndRetrieveAFlow(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.call(t, "POST", "/api/flows", tokA, createBody(map[string]any{
		"nationalId": "  ID-12345 ", "webhookUrl": "https://hooks.example/flowd", "referenceName": "Mortgage 7",
	}))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	created := r.json(t)
	id := created["flowId"].(string)
	if keysOf(created) != "_links,flowId,referenceId" || keysOf(created["_links"]) != "consent,self" {
		t.Fatalf("create body shape: %s", r.body)
	}
	links := created["_links"].(map[string]any)
	if links["self"].(map[string]any)["href"] != "/api/flows/"+id || r.header.Get("Location") != "/api/flows/"+id {
		t.Fatalf("self link %v, Location %q", links["self"], r.header.Get("Location"))
	}
	consentURL := links["consent"].(map[string]any)["href"].(string)
	token, ok := strings.CutPrefix(consentURL, "https://flowd.example/consent/")
	_, secret, routed := strings.Cut(token, ".")
	if !ok || !routed || len(secret) != 43 || strings.Contains(consentURL, id) {
		t.Fatalf("consent link %q: want {base_url}/consent/<route>.<43-character secret>, not the flow id", consentURL)
	}
	if created["referenceId"] != "ACME-1" {
		t.Fatalf("referenceId %v, want ACME-1", created["referenceId"])
	}

	g := e.call(t, "GET", "/api/flows/"+id, tokA, "")
	if g.status != 200 {
		t.Fatalf("get: %d %s", g.status, g.body)
	}
	env := g.json(t)
	if keysOf(env) != "_links,flow" || keysOf(env["_links"]) != "consent,self,tasks" {
		t.Fatalf("envelope shape: %s", g.body)
	}
	gl := env["_links"].(map[string]any)
	if gl["self"] != "/api/flows/"+id || gl["tasks"].(map[string]any)["href"] != "/api/tasks?flowId="+id ||
		gl["consent"].(map[string]any)["href"] != consentURL {
		t.Fatalf("links: %v", gl)
	}
	f := env["flow"].(map[string]any)
	const flowKeys = "_meta,actions,consent,createdAt,data,flowDefinitionId,flowId,flowNumber,hasErrors,hasIncidents," +
		"incidents,numAttachments,referenceId,referenceName,sandbox,sandboxConfig,status,updatedAt,version,versionTag"
	if keysOf(f) != flowKeys {
		t.Fatalf("flow keys\n got %s\nwant %s", keysOf(f), flowKeys)
	}
	want := map[string]any{
		"flowId": id, "version": 1.0, "hasErrors": false, "hasIncidents": false, "status": "active",
		"numAttachments": 0.0, "flowDefinitionId": "consent", "flowNumber": 1.0, "referenceId": "ACME-1",
		"referenceName": "Mortgage 7", "versionTag": nil, "sandbox": false,
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("flow.%s = %#v, want %#v", k, f[k], v)
		}
	}
	if keysOf(f["incidents"]) != "" || keysOf(f["sandboxConfig"]) != "" {
		t.Errorf("incidents %v, sandboxConfig %v: want {}", f["incidents"], f["sandboxConfig"])
	}
	data := f["data"].(map[string]any)
	wantData := map[string]any{"nationalId": "ID-12345", "lastName": "Nordmann", "redirectUrl": "https://bank.example/done",
		"webhookUrl": "https://hooks.example/flowd", "organizationNumber": "987654321"}
	if keysOf(data) != "lastName,nationalId,organizationNumber,redirectUrl,webhookUrl" {
		t.Errorf("data keys %s", keysOf(data))
	}
	for k, v := range wantData {
		if data[k] != v {
			t.Errorf("data.%s = %#v, want %#v", k, data[k], v)
		}
	}
	meta := f["_meta"].(map[string]any)
	if keysOf(meta) != "processDefinitionId,processInstanceId,processVersion" ||
		!regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(meta["processInstanceId"].(string)) {
		t.Errorf("_meta %v", meta)
	}
	c := f["consent"].(map[string]any)
	if keysOf(c) != "assuranceLevel,decidedAt,expiredAt,expiresAt,language,openedAt,status,textSha256,validUntil,withdrawnAt" || c["status"] != "Unopened" || c["openedAt"] != nil || c["decidedAt"] != nil {
		t.Errorf("consent %v", c)
	}
	for _, ts := range []any{f["createdAt"], f["updatedAt"], c["expiresAt"]} {
		if s, _ := ts.(string); !apiTimeRE.MatchString(s) {
			t.Errorf("timestamp %v is not RFC 3339 UTC with milliseconds", ts)
		}
	}
	if fmt.Sprint(f["actions"]) != "[read cancel]" {
		t.Errorf("actions %v, want [read cancel]", f["actions"])
	}
	if g := e.call(t, "GET", "/api/flows/"+id, tokARead, "").json(t); fmt.Sprint(g["flow"].(map[string]any)["actions"]) != "[read]" {
		t.Errorf("a read-only token may not cancel: actions %v", g["flow"].(map[string]any)["actions"])
	}

	// The tasks: the consent user task and the delivery of flow.created.
	tr := e.call(t, "GET", "/api/tasks?flowId="+id, tokA, "")
	var tasks struct {
		HasMore bool `json:"has_more"`
		Data    []map[string]any
	}
	if err := json.Unmarshal(tr.body, &tasks); err != nil || tr.status != 200 || tasks.HasMore || len(tasks.Data) != 2 {
		t.Fatalf("tasks: %d %s", tr.status, tr.body)
	}
	if keysOf(tasks.Data[0]) != "createdAt,flowId,id,status,taskCategory,taskType,updatedAt" {
		t.Fatalf("task keys %s", keysOf(tasks.Data[0]))
	}
	byType := map[string]map[string]any{}
	for _, tk := range tasks.Data {
		byType[tk["taskType"].(string)] = tk
		if tk["flowId"] != id || tk["status"] != "pending" || !apiTimeRE.MatchString(tk["createdAt"].(string)) {
			t.Errorf("task %v", tk)
		}
	}
	if byType["consent"]["taskCategory"] != "user-task" || byType["send-initiate-webhook"]["taskCategory"] != "service-task" {
		t.Fatalf("tasks %v", tasks.Data)
	}

	// The flow.created event was stored with the flow, naming its delivery task.
	var kind, taskID, status, flowStatus, url string
	var version int
	if err := e.pool.QueryRow(context.Background(), `select kind, task_id, status, flow_status, version, url from test_events where flow_id = $1`, id).
		Scan(&kind, &taskID, &status, &flowStatus, &version, &url); err != nil {
		t.Fatal(err)
	}
	if kind != "flow.created" || taskID != byType["send-initiate-webhook"]["id"] || status != "Unopened" || flowStatus != "active" ||
		version != 1 || url != "https://hooks.example/flowd" {
		t.Fatalf("event %s task %s %s %s v%d %s", kind, taskID, status, flowStatus, version, url)
	}
}

func TestAFlowWithoutWebhookHasNoDeliveryAndEmptyOptionalFields(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.create(t, tokASandbox, nil)
	f := e.call(t, "GET", "/api/flows/"+id, tokA, "").json(t)["flow"].(map[string]any)
	data := f["data"].(map[string]any)
	if data["webhookUrl"] != "" || f["referenceName"] != nil || f["sandbox"] != true {
		t.Fatalf("flow %v", f)
	}
	// Its event is kept for the events API, with nowhere to deliver it.
	if n := e.count(t, `select count(*) from test_events where flow_id = $1 and kind = 'flow.created' and url = ''`, id); n != 1 {
		t.Fatalf("%d flow.created events without URL, want 1", n)
	}
	if n := e.count(t, `select count(*) from flow_tasks where flow_id = $1`, id); n != 1 {
		t.Fatalf("%d tasks, want the consent task only", n)
	}
	// Organization B keeps no organization number: "" rather than absent.
	idB := e.create(t, tokB, map[string]any{"redirectUrl": "https://beta.example/back"})
	fb := e.call(t, "GET", "/api/flows/"+idB, tokB, "").json(t)["flow"].(map[string]any)
	if fb["data"].(map[string]any)["organizationNumber"] != "" || fb["referenceId"] != "BETA-1" || fb["sandbox"] != false {
		t.Fatalf("flow of B %v", fb)
	}
}

func TestCreateNamesEveryOffendingField(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	long := strings.Repeat("a", 201)
	tests := []struct {
		name   string
		token  string
		body   string
		header []string
		status int
		fields string
	}{
		{"empty object", tokA, `{}`, nil, 400, "nationalId,lastName,redirectUrl"},
		{"wrong types and unknown field", tokA, `{"nationalId":1,"lastName":true,"redirectUrl":[],"organizationId":"x"}`, nil, 400, "lastName,nationalId,organizationId,redirectUrl"},
		{"unknown field and invalid values", tokA, `{"nationalId":"","lastName":"x\u0001","redirectUrl":"ftp://x","foo":1}`, nil, 400, "foo,lastName,nationalId,redirectUrl"},
		{"blank after trimming", tokA, createBody(map[string]any{"nationalId": "   ", "lastName": "\t"}), nil, 400, "nationalId,lastName"},
		{"generic id charset", tokA, createBody(map[string]any{"nationalId": "12 34"}), nil, 400, "nationalId"},
		{"generic id length", tokA, createBody(map[string]any{"nationalId": strings.Repeat("1", 65)}), nil, 400, "nationalId"},
		{"last name too long", tokA, createBody(map[string]any{"lastName": long}), nil, 400, "lastName"},
		{"last name control character", tokA, createBody(map[string]any{"lastName": "Nord\u0000mann"}), nil, 400, "lastName"},
		{"last name right-to-left override", tokA, createBody(map[string]any{"lastName": "Nord\u202Emann"}), nil, 400, "lastName"},
		{"reference name zero-width space", tokA, createBody(map[string]any{"referenceName": "Loan\u200B 4711"}), nil, 400, "referenceName"},
		{"redirect with an isolate", tokA, createBody(map[string]any{"redirectUrl": "https://bank.example/\u2066done"}), nil, 400, "redirectUrl"},
		{"webhook with a byte order mark", tokA, createBody(map[string]any{"webhookUrl": "https://hooks.example/\uFEFF"}), nil, 400, "webhookUrl"},
		{"reference name too long", tokA, createBody(map[string]any{"referenceName": long}), nil, 400, "referenceName"},
		{"http redirect", tokA, createBody(map[string]any{"redirectUrl": "http://bank.example/"}), nil, 400, "redirectUrl"},
		{"relative redirect", tokA, createBody(map[string]any{"redirectUrl": "/done"}), nil, 400, "redirectUrl"},
		{"javascript redirect", tokA, createBody(map[string]any{"redirectUrl": "javascript:alert(1)"}), nil, 400, "redirectUrl"},
		{"user info", tokA, createBody(map[string]any{"redirectUrl": "https://u:p@bank.example/"}), nil, 400, "redirectUrl"},
		{"too long URL", tokA, createBody(map[string]any{"redirectUrl": "https://bank.example/" + strings.Repeat("a", 2048)}), nil, 400, "redirectUrl"},
		{"bad webhook", tokA, createBody(map[string]any{"webhookUrl": "ftp://hooks.example/"}), nil, 400, "webhookUrl"},
		{"every field at once", tokA, `{"nationalId":"!","lastName":"","redirectUrl":"http://x.example","webhookUrl":"nope","referenceName":"` + long + `"}`, nil, 400, "nationalId,lastName,redirectUrl,webhookUrl,referenceName"},
		{"redirect outside the allow-list", tokB, createBody(map[string]any{"redirectUrl": "https://evil.example/"}), nil, 400, "redirectUrl"},
		{"idempotency key too long", tokA, createBody(nil), []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "Idempotency-Key"},
		{"not JSON", tokA, `{`, nil, 400, ""},
		{"http on loopback is fine", tokA, createBody(map[string]any{"redirectUrl": "http://localhost:3000/cb", "webhookUrl": "http://127.0.0.1:9/h"}), nil, 201, ""},
		{"allow-listed origin", tokB, createBody(map[string]any{"redirectUrl": "https://BETA.example:443/x?y=1"}), nil, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, "POST", "/api/flows", tt.token, tt.body, tt.header...)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.status == 400 {
				if r.header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("content type %q", r.header.Get("Content-Type"))
				}
				if got := strings.Join(r.fields(t), ","); got != tt.fields {
					t.Fatalf("fields %q, want %q: %s", got, tt.fields, r.body)
				}
				if strings.Contains(string(r.body), "!") && strings.Contains(tt.body, `"!"`) {
					t.Fatalf("the problem repeats the national id: %s", r.body)
				}
			}
		})
	}
	// Nothing of the refused requests was stored: only the two that passed.
	if n := e.count(t, `select count(*) from flows`); n != 2 {
		t.Fatalf("%d flows stored, want 2", n)
	}
	if r := e.call(t, "POST", "/api/flows", tokA, ""); r.status != 415 {
		t.Fatalf("no body, no content type: %d", r.status)
	}
	if r := e.call(t, "POST", "/api/flows", tokA, createBody(map[string]any{"lastName": strings.Repeat("a", 70<<10)})); r.status != 413 {
		t.Fatalf("70 KiB body: %d", r.status)
	}
}

func TestNationalIDFormatIsConfigurable(t *testing.T) {
	t.Parallel()
	e := newAPI(t, withNationalIDFormat(flows.FormatNorway))
	if r := e.call(t, "POST", "/api/flows", tokA, createBody(map[string]any{"nationalId": "01017010171"})); r.status != 400 ||
		strings.Join(r.fields(t), ",") != "nationalId" || strings.Contains(string(r.body), "01017010171") {
		t.Fatalf("a bad check digit: %d %s", r.status, r.body)
	}
	e.create(t, tokA, map[string]any{"nationalId": "01017010170"})
}

func TestAuthenticationAndScopes(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.create(t, tokA, nil)
	tests := []struct {
		method, path, token, body string
		status                    int
		scope                     string
	}{
		{"GET", "/api/flows", "", "", 401, ""},
		{"GET", "/api/flows/" + id, "not-a-token", "", 401, ""},
		{"POST", "/api/flows", "", createBody(nil), 401, ""},
		{"POST", "/api/flows", tokARead, createBody(nil), 403, "flows:write"},
		{"POST", "/api/flows/" + id + "/cancel", tokARead, "", 403, "flows:write"},
		{"DELETE", "/api/flows/" + id, tokARead, "", 403, "flows:delete"},
		{"DELETE", "/api/flows/" + id, tokAWrite, "", 403, "flows:delete"},
		{"GET", "/api/flows", tokAWrite, "", 403, "flows:read"},
		{"GET", "/api/flows/" + id, tokADelete, "", 403, "flows:read"},
		{"GET", "/api/tasks?flowId=" + id, tokAWrite, "", 403, "flows:read"},
		{"GET", "/api/flows/" + id, tokARead, "", 200, ""},
		{"GET", "/api/tasks?flowId=" + id, tokARead, "", 200, ""},
		{"GET", "/api/flows", tokARead, "", 200, ""},
	}
	for _, tt := range tests {
		r := e.call(t, tt.method, tt.path, tt.token, tt.body)
		if r.status != tt.status {
			t.Errorf("%s %s with %q: %d, want %d: %s", tt.method, tt.path, tt.token, r.status, tt.status, r.body)
			continue
		}
		switch tt.status {
		case 401:
			want := `Bearer realm="flowd"` // no credentials: no error code (RFC 6750 section 3.1)
			if tt.token != "" {
				want += `, error="invalid_token"`
			}
			if r.header.Get("WWW-Authenticate") != want {
				t.Errorf("%s %s: WWW-Authenticate %q", tt.method, tt.path, r.header.Get("WWW-Authenticate"))
			}
		case 403:
			if h := r.header.Get("WWW-Authenticate"); !strings.Contains(h, `error="insufficient_scope"`) || !strings.Contains(h, tt.scope) {
				t.Errorf("%s %s: WWW-Authenticate %q", tt.method, tt.path, h)
			}
		}
	}
	// The refused cancel and delete changed nothing.
	if f := e.call(t, "GET", "/api/flows/"+id, tokA, "").json(t)["flow"].(map[string]any); f["status"] != "active" || f["version"] != 1.0 {
		t.Fatalf("flow changed by refused calls: %v", f)
	}
}

func TestAnotherOrganizationsFlowsDoNotExist(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	var ids []string
	for range 3 {
		ids = append(ids, e.create(t, tokA, map[string]any{"webhookUrl": "https://hooks.example/a"}))
	}
	e.create(t, tokB, map[string]any{"redirectUrl": "https://beta.example/"})
	for _, id := range ids {
		for _, c := range []struct{ method, path string }{
			{"GET", "/api/flows/" + id},
			{"DELETE", "/api/flows/" + id},
			{"POST", "/api/flows/" + id + "/cancel"},
			{"GET", "/api/tasks?flowId=" + id},
		} {
			r := e.call(t, c.method, c.path, tokB, "")
			if r.status != 404 || r.header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s as B: %d %s", c.method, c.path, r.status, r.body)
			}
		}
		for _, q := range []string{"starting_after", "ending_before"} {
			if r := e.call(t, "GET", "/api/flows?"+q+"="+id, tokB, ""); r.status != 400 {
				t.Errorf("B paging from A's flow: %d %s", r.status, r.body)
			}
		}
	}
	for _, archived := range []string{"false", "true"} {
		r := e.call(t, "GET", "/api/flows?limit=100&archived="+archived, tokB, "")
		for _, item := range r.json(t)["data"].([]any) {
			it := item.(map[string]any)
			if it["organizationId"] != orgB {
				t.Errorf("B's list holds %v", it)
			}
		}
	}
	// A's flows are untouched by B's attempts.
	if n := e.count(t, `select count(*) from flows where organization_id = $1 and process_status = 'active'`, orgA); n != 3 {
		t.Fatalf("A has %d active flows, want 3", n)
	}
}

func TestMalformedAndUnknownIDsAreNotFound(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	for _, id := range []string{"nope", "00000000-0000-0000-0000-000000000000", "{0190a3c4-0000-7000-8000-000000000000}",
		"0190a3c40000700080000000000000001", "%27%20or%201=1"} {
		for _, c := range []struct{ method, path string }{
			{"GET", "/api/flows/" + id}, {"DELETE", "/api/flows/" + id}, {"POST", "/api/flows/" + id + "/cancel"},
			{"GET", "/api/tasks?flowId=" + id},
		} {
			if r := e.call(t, c.method, c.path, tokA, ""); r.status != 404 {
				t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
			}
		}
	}
	if r := e.call(t, "GET", "/api/tasks", tokA, ""); r.status != 400 || strings.Join(r.fields(t), ",") != "flowId" {
		t.Fatalf("tasks without flowId: %d %s", r.status, r.body)
	}
}

func TestListParametersAreChecked(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.create(t, tokA, nil)
	other := e.create(t, tokB, map[string]any{"redirectUrl": "https://beta.example/back"})
	tests := []struct {
		query  string
		fields string
	}{
		{"limit=0", "limit"},
		{"limit=101", "limit"},
		{"limit=ten", "limit"},
		{"limit=-1", "limit"},
		{"limit=1&limit=2", "limit"},
		{"archived=yes", "archived"},
		{"status=active", "status"},
		{"starting_after=nope", "starting_after"},
		{"ending_before=", "ending_before"},
		{"starting_after=" + id + "&ending_before=" + id, "ending_before"},
		{"starting_after=00000000-0000-0000-0000-000000000000", "starting_after"},
		{"starting_after=" + other, "starting_after"},
		{"ending_before=" + other, "ending_before"},
		{"page=2&limit=500&archived=1", "archived,limit,page"},
	}
	for _, tt := range tests {
		r := e.call(t, "GET", "/api/flows?"+tt.query, tokA, "")
		got := r.fields(t)
		slices.Sort(got)
		if r.status != 400 || strings.Join(got, ",") != tt.fields {
			t.Errorf("?%s: %d %v, want 400 naming %s: %s", tt.query, r.status, got, tt.fields, r.body)
		}
	}
	for _, q := range []string{"", "limit=1", "limit=100", "archived=false", "status=Unopened", "archived=true&status=Accepted"} {
		if r := e.call(t, "GET", "/api/flows?"+q, tokA, ""); r.status != 200 {
			t.Errorf("?%s: %d %s", q, r.status, r.body)
		}
	}
	r := e.call(t, "GET", "/api/flows", tokA, "").json(t)
	item := r["data"].([]any)[0].(map[string]any)
	if keysOf(item) != "archived,createdAt,flowDefinitionId,flowNumber,id,nationalId,organizationId,referenceId,sandbox,status,updatedAt" ||
		item["id"] != id || item["status"] != "Unopened" || item["nationalId"] != "ID-12345" || item["archived"] != false ||
		item["organizationId"] != orgA || item["flowNumber"] != 1.0 || r["has_more"] != false {
		t.Fatalf("list %v", r)
	}
}

func TestCancelEndsTheProcess(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.create(t, tokA, map[string]any{"webhookUrl": "https://hooks.example/h"})
	r := e.call(t, "POST", "/api/flows/"+id+"/cancel", tokA, "")
	if r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	f := r.json(t)["flow"].(map[string]any)
	if f["status"] != "cancelled" || f["version"] != 2.0 || fmt.Sprint(f["actions"]) != "[read]" ||
		f["consent"].(map[string]any)["status"] != "Unopened" {
		t.Fatalf("cancelled flow %v", f)
	}
	if r := e.call(t, "POST", "/api/flows/"+id+"/cancel", tokA, ""); r.status != 409 {
		t.Fatalf("second cancel: %d %s", r.status, r.body)
	}
	active := e.call(t, "GET", "/api/flows", tokA, "").json(t)["data"].([]any)
	archived := e.call(t, "GET", "/api/flows?archived=true", tokA, "").json(t)["data"].([]any)
	if len(active) != 0 || len(archived) != 1 || archived[0].(map[string]any)["archived"] != true {
		t.Fatalf("active %v archived %v", active, archived)
	}
	var kinds string
	if err := e.pool.QueryRow(context.Background(), `select string_agg(kind || ':' || version || ':' || flow_status, ',' order by id) from test_events`).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if kinds != "flow.created:1:active,flow.cancelled:2:cancelled" {
		t.Fatalf("events %s", kinds)
	}
	if n := e.count(t, `select count(*) from flow_tasks where flow_id = $1 and task_type = 'consent' and status = 'cancelled'`, id); n != 1 {
		t.Fatal("the consent task was not cancelled")
	}
	if n := e.count(t, `select count(*) from flow_tasks where flow_id = $1 and task_type = 'send-initiate-webhook'`, id); n != 2 {
		t.Fatalf("%d delivery tasks, want one per event", n)
	}
}

func TestDeleteRemovesEverythingAndLogsIt(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.create(t, tokA, map[string]any{"webhookUrl": "https://hooks.example/h"})
	keep := e.create(t, tokA, nil)
	var taskID string
	if err := e.pool.QueryRow(context.Background(), `select id::text from flow_tasks where flow_id = $1 and task_type = 'send-initiate-webhook'`, id).Scan(&taskID); err != nil {
		t.Fatal(err)
	}
	if err := flows.NewTaskReports(e.pool).TaskFailing(context.Background(), orgA, taskID, "hooks.example: connection refused"); err != nil {
		t.Fatal(err)
	}
	r := e.call(t, "DELETE", "/api/flows/"+id, tokA, "")
	if r.status != 200 || keysOf(r.json(t)) != "flowId,referenceId,status" {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if d := r.json(t); d["status"] != "deleted" || d["flowId"] != id || d["referenceId"] != "ACME-1" {
		t.Fatalf("delete body %v", d)
	}
	if r := e.call(t, "DELETE", "/api/flows/"+id, tokA, ""); r.status != 404 {
		t.Fatalf("second delete: %d", r.status)
	}
	if r := e.call(t, "GET", "/api/flows/"+id, tokA, ""); r.status != 404 {
		t.Fatalf("get after delete: %d", r.status)
	}
	for _, table := range []string{"flows where id", "flow_tasks where flow_id", "flow_incidents where flow_id", "consent_requests where flow_id"} {
		if n := e.count(t, `select count(*) from `+table+` = $1`, id); n != 0 {
			t.Errorf("%d rows left in %s", n, table)
		}
	}
	var flowID, ref, by string
	if err := e.pool.QueryRow(context.Background(), `select flow_id::text, reference_id, deleted_by from flow_deletions where organization_id = $1`, orgA).Scan(&flowID, &ref, &by); err != nil {
		t.Fatal(err)
	}
	if flowID != id || ref != "ACME-1" || by != "client-a" {
		t.Fatalf("deletion log %s %s %s", flowID, ref, by)
	}
	var kinds string
	if err := e.pool.QueryRow(context.Background(), `select string_agg(kind || ':' || task_id, ',' order by id) from test_events where flow_id = $1`, id).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(kinds, "flow.created:") || !strings.HasSuffix(kinds, ",cancel-pending:,flow.deleted:") {
		t.Fatalf("events %s: want created, then pending events cancelled, then flow.deleted", kinds)
	}
	dels, more, err := e.flows.Deletions(context.Background(), orgA, 10, "")
	if err != nil || more || len(dels) != 1 || dels[0].FlowID != id {
		t.Fatalf("Deletions: %v %v %v", dels, more, err)
	}
	if r := e.call(t, "GET", "/api/flows/"+keep, tokA, ""); r.status != 200 {
		t.Fatalf("the other flow: %d", r.status)
	}
	// A flow without a webhook has its flow.deleted for the events API, with nowhere to deliver it.
	e.call(t, "DELETE", "/api/flows/"+keep, tokADelete, "")
	if n := e.count(t, `select count(*) from test_events where flow_id = $1 and kind = 'flow.deleted' and url = ''`, keep); n != 1 {
		t.Fatal("no flow.deleted event, or one with a URL, for a flow without webhookUrl")
	}
}

func TestTheNationalIDIsNotStoredInClear(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	const nationalID, lastName = "SECRETID-XYZ987", "Quixotezzz"
	id := e.create(t, tokA, map[string]any{"nationalId": nationalID, "lastName": lastName})
	var row string
	if err := e.pool.QueryRow(context.Background(), `select f::text || coalesce((select string_agg(k::text, '') from flow_idempotency_keys k), '')
		|| (select string_agg(c::text, '') from consent_requests c) from flows f where id = $1`, id).Scan(&row); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{nationalID, lastName, fmt.Sprintf("%x", nationalID), fmt.Sprintf("%x", lastName)} {
		if strings.Contains(strings.ToLower(row), strings.ToLower(secret)) {
			t.Fatalf("%q is stored readable: %s", secret, row)
		}
	}
	// Yet the API shows it to its organization.
	if d := e.call(t, "GET", "/api/flows/"+id, tokA, "").json(t)["flow"].(map[string]any)["data"].(map[string]any); d["nationalId"] != nationalID || d["lastName"] != lastName {
		t.Fatalf("data %v", d)
	}
}
