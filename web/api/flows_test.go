package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/modules/flows/taskreports"
	"github.com/flowd/flowd/web/internal/webtest"
)

var apiTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestCreateAndRetrieveAFlow(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{
		"nationalId": "  ID-12345 ", "webhookUrl": "https://hooks.example/flowd", "referenceName": "Mortgage 7",
	}))
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	created := r.JSON(t)
	id := created["flowId"].(string)
	if webtest.KeysOf(created) != "_links,flowId,referenceId" || webtest.KeysOf(created["_links"]) != "consent,self" {
		t.Fatalf("create body shape: %s", r.Body)
	}
	links := created["_links"].(map[string]any)
	if links["self"].(map[string]any)["href"] != "/api/flows/"+id || r.Header.Get("Location") != "/api/flows/"+id {
		t.Fatalf("self link %v, Location %q", links["self"], r.Header.Get("Location"))
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

	g := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "")
	if g.Status != 200 {
		t.Fatalf("get: %d %s", g.Status, g.Body)
	}
	env := g.JSON(t)
	if webtest.KeysOf(env) != "_links,flow" || webtest.KeysOf(env["_links"]) != "consent,self,tasks" {
		t.Fatalf("envelope shape: %s", g.Body)
	}
	gl := env["_links"].(map[string]any)
	if gl["self"] != "/api/flows/"+id || gl["tasks"].(map[string]any)["href"] != "/api/tasks?flowId="+id ||
		gl["consent"].(map[string]any)["href"] != consentURL {
		t.Fatalf("links: %v", gl)
	}
	f := env["flow"].(map[string]any)
	const flowKeys = "_meta,actions,consent,createdAt,data,flowDefinitionId,flowId,flowNumber,hasErrors,hasIncidents," +
		"incidents,numAttachments,parameters,referenceId,referenceName,sandbox,sandboxConfig,status,updatedAt,version,versionTag"
	if webtest.KeysOf(f) != flowKeys {
		t.Fatalf("flow keys\n got %s\nwant %s", webtest.KeysOf(f), flowKeys)
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
	if webtest.KeysOf(f["incidents"]) != "" || webtest.KeysOf(f["sandboxConfig"]) != "" {
		t.Errorf("incidents %v, sandboxConfig %v: want {}", f["incidents"], f["sandboxConfig"])
	}
	data := f["data"].(map[string]any)
	wantData := map[string]any{"nationalId": "ID-12345", "lastName": "Nordmann", "redirectUrl": "https://bank.example/done",
		"webhookUrl": "https://hooks.example/flowd", "organizationNumber": "987654321"}
	if webtest.KeysOf(data) != "lastName,nationalId,organizationNumber,redirectUrl,webhookUrl" {
		t.Errorf("data keys %s", webtest.KeysOf(data))
	}
	for k, v := range wantData {
		if data[k] != v {
			t.Errorf("data.%s = %#v, want %#v", k, data[k], v)
		}
	}
	meta := f["_meta"].(map[string]any)
	if webtest.KeysOf(meta) != "processDefinitionId,processInstanceId,processVersion" ||
		!regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(meta["processInstanceId"].(string)) {
		t.Errorf("_meta %v", meta)
	}
	c := f["consent"].(map[string]any)
	if webtest.KeysOf(c) != "assuranceLevel,decidedAt,expiredAt,expiresAt,language,lastUsedAt,numUses,openedAt,status,textSha256,validUntil,withdrawnAt" ||
		c["status"] != "Unopened" || c["openedAt"] != nil || c["decidedAt"] != nil || c["numUses"] != 0.0 || c["lastUsedAt"] != nil {
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
	if g := e.Call(t, "GET", "/api/flows/"+id, webtest.TokARead, "").JSON(t); fmt.Sprint(g["flow"].(map[string]any)["actions"]) != "[read]" {
		t.Errorf("a read-only token may not cancel: actions %v", g["flow"].(map[string]any)["actions"])
	}

	// The tasks: the consent user task and the delivery of flow.created.
	tr := e.Call(t, "GET", "/api/tasks?flowId="+id, webtest.TokA, "")
	var tasks struct {
		HasMore bool `json:"has_more"`
		Data    []map[string]any
	}
	if err := json.Unmarshal(tr.Body, &tasks); err != nil || tr.Status != 200 || tasks.HasMore || len(tasks.Data) != 2 {
		t.Fatalf("tasks: %d %s", tr.Status, tr.Body)
	}
	if webtest.KeysOf(tasks.Data[0]) != "createdAt,flowId,id,status,taskCategory,taskType,updatedAt" {
		t.Fatalf("task keys %s", webtest.KeysOf(tasks.Data[0]))
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
	if err := e.Pool.QueryRow(context.Background(), `select kind, task_id, status, flow_status, version, url from test_events where flow_id = $1`, id).
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
	id := e.Create(t, webtest.TokASandbox, nil)
	f := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "").JSON(t)["flow"].(map[string]any)
	data := f["data"].(map[string]any)
	if data["webhookUrl"] != "" || f["referenceName"] != nil || f["sandbox"] != true {
		t.Fatalf("flow %v", f)
	}
	// Its event is kept for the events API, with nowhere to deliver it.
	if n := e.Count(t, `select count(*) from test_events where flow_id = $1 and kind = 'flow.created' and url = ''`, id); n != 1 {
		t.Fatalf("%d flow.created events without URL, want 1", n)
	}
	if n := e.Count(t, `select count(*) from flow_tasks where flow_id = $1`, id); n != 1 {
		t.Fatalf("%d tasks, want the consent task only", n)
	}
	// Organization B keeps no organization number: "" rather than absent.
	idB := e.Create(t, webtest.TokB, map[string]any{"redirectUrl": "https://beta.example/back"})
	fb := e.Call(t, "GET", "/api/flows/"+idB, webtest.TokB, "").JSON(t)["flow"].(map[string]any)
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
		{"empty object", webtest.TokA, `{}`, nil, 400, "nationalId,lastName,redirectUrl"},
		{"wrong types and unknown field", webtest.TokA, `{"nationalId":1,"lastName":true,"redirectUrl":[],"organizationId":"x"}`, nil, 400, "lastName,nationalId,organizationId,redirectUrl"},
		{"unknown field and invalid values", webtest.TokA, `{"nationalId":"","lastName":"x\u0001","redirectUrl":"ftp://x","foo":1}`, nil, 400, "foo,lastName,nationalId,redirectUrl"},
		{"blank after trimming", webtest.TokA, webtest.CreateBody(map[string]any{"nationalId": "   ", "lastName": "\t"}), nil, 400, "nationalId,lastName"},
		{"generic id charset", webtest.TokA, webtest.CreateBody(map[string]any{"nationalId": "12 34"}), nil, 400, "nationalId"},
		{"generic id length", webtest.TokA, webtest.CreateBody(map[string]any{"nationalId": strings.Repeat("1", 65)}), nil, 400, "nationalId"},
		{"last name too long", webtest.TokA, webtest.CreateBody(map[string]any{"lastName": long}), nil, 400, "lastName"},
		{"last name control character", webtest.TokA, webtest.CreateBody(map[string]any{"lastName": "Nord\u0000mann"}), nil, 400, "lastName"},
		{"last name right-to-left override", webtest.TokA, webtest.CreateBody(map[string]any{"lastName": "Nord\u202Emann"}), nil, 400, "lastName"},
		{"reference name zero-width space", webtest.TokA, webtest.CreateBody(map[string]any{"referenceName": "Loan\u200B 4711"}), nil, 400, "referenceName"},
		{"redirect with an isolate", webtest.TokA, webtest.CreateBody(map[string]any{"redirectUrl": "https://bank.example/\u2066done"}), nil, 400, "redirectUrl"},
		{"webhook with a byte order mark", webtest.TokA, webtest.CreateBody(map[string]any{"webhookUrl": "https://hooks.example/\uFEFF"}), nil, 400, "webhookUrl"},
		{"reference name too long", webtest.TokA, webtest.CreateBody(map[string]any{"referenceName": long}), nil, 400, "referenceName"},
		{"http redirect", webtest.TokA, webtest.CreateBody(map[string]any{"redirectUrl": "http://bank.example/"}), nil, 400, "redirectUrl"},
		{"relative redirect", webtest.TokA, webtest.CreateBody(map[string]any{"redirectUrl": "/done"}), nil, 400, "redirectUrl"},
		{"javascript redirect", webtest.TokA, webtest.CreateBody(map[string]any{"redirectUrl": "javascript:alert(1)"}), nil, 400, "redirectUrl"},
		{"user info", webtest.TokA, webtest.CreateBody(map[string]any{"redirectUrl": "https://u:p@bank.example/"}), nil, 400, "redirectUrl"},
		{"too long URL", webtest.TokA, webtest.CreateBody(map[string]any{"redirectUrl": "https://bank.example/" + strings.Repeat("a", 2048)}), nil, 400, "redirectUrl"},
		{"bad webhook", webtest.TokA, webtest.CreateBody(map[string]any{"webhookUrl": "ftp://hooks.example/"}), nil, 400, "webhookUrl"},
		{"every field at once", webtest.TokA, `{"nationalId":"!","lastName":"","redirectUrl":"http://x.example","webhookUrl":"nope","referenceName":"` + long + `"}`, nil, 400, "nationalId,lastName,redirectUrl,webhookUrl,referenceName"},
		{"redirect outside the allow-list", webtest.TokB, webtest.CreateBody(map[string]any{"redirectUrl": "https://evil.example/"}), nil, 400, "redirectUrl"},
		{"idempotency key too long", webtest.TokA, webtest.CreateBody(nil), []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "Idempotency-Key"},
		{"not JSON", webtest.TokA, `{`, nil, 400, ""},
		{"http on loopback is fine", webtest.TokA, webtest.CreateBody(map[string]any{"redirectUrl": "http://localhost:3000/cb", "webhookUrl": "http://127.0.0.1:9/h"}), nil, 201, ""},
		{"allow-listed origin", webtest.TokB, webtest.CreateBody(map[string]any{"redirectUrl": "https://BETA.example:443/x?y=1"}), nil, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Call(t, "POST", "/api/flows", tt.token, tt.body, tt.header...)
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Body)
			}
			if tt.status == 400 {
				if r.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("content type %q", r.Header.Get("Content-Type"))
				}
				if got := strings.Join(r.Fields(t), ","); got != tt.fields {
					t.Fatalf("fields %q, want %q: %s", got, tt.fields, r.Body)
				}
				if strings.Contains(string(r.Body), "!") && strings.Contains(tt.body, `"!"`) {
					t.Fatalf("the problem repeats the national id: %s", r.Body)
				}
			}
		})
	}
	// Nothing of the refused requests was stored: only the two that passed.
	if n := e.Count(t, `select count(*) from flows`); n != 2 {
		t.Fatalf("%d flows stored, want 2", n)
	}
	if r := e.Call(t, "POST", "/api/flows", webtest.TokA, ""); r.Status != 415 {
		t.Fatalf("no body, no content type: %d", r.Status)
	}
	if r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{"lastName": strings.Repeat("a", 70<<10)})); r.Status != 413 {
		t.Fatalf("70 KiB body: %d", r.Status)
	}
}

func TestNationalIDFormatIsConfigurable(t *testing.T) {
	t.Parallel()
	e := newAPI(t, webtest.WithNationalIDFormat(nationalid.FormatNorway))
	if r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{"nationalId": "01017010171"})); r.Status != 400 ||
		strings.Join(r.Fields(t), ",") != "nationalId" || strings.Contains(string(r.Body), "01017010171") {
		t.Fatalf("a bad check digit: %d %s", r.Status, r.Body)
	}
	e.Create(t, webtest.TokA, map[string]any{"nationalId": "01017010170"})
}

func TestAuthenticationAndScopes(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.Create(t, webtest.TokA, nil)
	tests := []struct {
		method, path, token, body string
		status                    int
		scope                     string
	}{
		{"GET", "/api/flows", "", "", 401, ""},
		{"GET", "/api/flows/" + id, "not-a-token", "", 401, ""},
		{"POST", "/api/flows", "", webtest.CreateBody(nil), 401, ""},
		{"POST", "/api/flows", webtest.TokARead, webtest.CreateBody(nil), 403, "flows:write"},
		{"POST", "/api/flows/" + id + "/cancel", webtest.TokARead, "", 403, "flows:write"},
		{"DELETE", "/api/flows/" + id, webtest.TokARead, "", 403, "flows:delete"},
		{"DELETE", "/api/flows/" + id, webtest.TokAWrite, "", 403, "flows:delete"},
		{"GET", "/api/flows", webtest.TokAWrite, "", 403, "flows:read"},
		{"GET", "/api/flows/" + id, webtest.TokADelete, "", 403, "flows:read"},
		{"GET", "/api/tasks?flowId=" + id, webtest.TokAWrite, "", 403, "flows:read"},
		{"GET", "/api/flows/" + id, webtest.TokARead, "", 200, ""},
		{"GET", "/api/tasks?flowId=" + id, webtest.TokARead, "", 200, ""},
		{"GET", "/api/flows", webtest.TokARead, "", 200, ""},
	}
	for _, tt := range tests {
		r := e.Call(t, tt.method, tt.path, tt.token, tt.body)
		if r.Status != tt.status {
			t.Errorf("%s %s with %q: %d, want %d: %s", tt.method, tt.path, tt.token, r.Status, tt.status, r.Body)
			continue
		}
		switch tt.status {
		case 401:
			want := `Bearer realm="flowd"` // no credentials: no error code (RFC 6750 section 3.1)
			if tt.token != "" {
				want += `, error="invalid_token"`
			}
			if r.Header.Get("WWW-Authenticate") != want {
				t.Errorf("%s %s: WWW-Authenticate %q", tt.method, tt.path, r.Header.Get("WWW-Authenticate"))
			}
		case 403:
			if h := r.Header.Get("WWW-Authenticate"); !strings.Contains(h, `error="insufficient_scope"`) || !strings.Contains(h, tt.scope) {
				t.Errorf("%s %s: WWW-Authenticate %q", tt.method, tt.path, h)
			}
		}
	}
	// The refused cancel and delete changed nothing.
	if f := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "").JSON(t)["flow"].(map[string]any); f["status"] != "active" || f["version"] != 1.0 {
		t.Fatalf("flow changed by refused calls: %v", f)
	}
}

func TestAnotherOrganizationsFlowsDoNotExist(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	var ids []string
	for range 3 {
		ids = append(ids, e.Create(t, webtest.TokA, map[string]any{"webhookUrl": "https://hooks.example/a"}))
	}
	e.Create(t, webtest.TokB, map[string]any{"redirectUrl": "https://beta.example/"})
	for _, id := range ids {
		for _, c := range []struct{ method, path string }{
			{"GET", "/api/flows/" + id},
			{"DELETE", "/api/flows/" + id},
			{"POST", "/api/flows/" + id + "/cancel"},
			{"GET", "/api/tasks?flowId=" + id},
		} {
			r := e.Call(t, c.method, c.path, webtest.TokB, "")
			if r.Status != 404 || r.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s as B: %d %s", c.method, c.path, r.Status, r.Body)
			}
		}
		for _, q := range []string{"starting_after", "ending_before"} {
			if r := e.Call(t, "GET", "/api/flows?"+q+"="+id, webtest.TokB, ""); r.Status != 400 {
				t.Errorf("B paging from A's flow: %d %s", r.Status, r.Body)
			}
		}
	}
	for _, archived := range []string{"false", "true"} {
		r := e.Call(t, "GET", "/api/flows?limit=100&archived="+archived, webtest.TokB, "")
		for _, item := range r.JSON(t)["data"].([]any) {
			it := item.(map[string]any)
			if it["organizationId"] != webtest.OrgB {
				t.Errorf("B's list holds %v", it)
			}
		}
	}
	// A's flows are untouched by B's attempts.
	if n := e.Count(t, `select count(*) from flows where organization_id = $1 and process_status = 'active'`, webtest.OrgA); n != 3 {
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
			if r := e.Call(t, c.method, c.path, webtest.TokA, ""); r.Status != 404 {
				t.Errorf("%s %s: %d %s", c.method, c.path, r.Status, r.Body)
			}
		}
	}
	if r := e.Call(t, "GET", "/api/tasks", webtest.TokA, ""); r.Status != 400 || strings.Join(r.Fields(t), ",") != "flowId" {
		t.Fatalf("tasks without flowId: %d %s", r.Status, r.Body)
	}
}

func TestListParametersAreChecked(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.Create(t, webtest.TokA, nil)
	other := e.Create(t, webtest.TokB, map[string]any{"redirectUrl": "https://beta.example/back"})
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
		r := e.Call(t, "GET", "/api/flows?"+tt.query, webtest.TokA, "")
		got := r.Fields(t)
		slices.Sort(got)
		if r.Status != 400 || strings.Join(got, ",") != tt.fields {
			t.Errorf("?%s: %d %v, want 400 naming %s: %s", tt.query, r.Status, got, tt.fields, r.Body)
		}
	}
	for _, q := range []string{"", "limit=1", "limit=100", "archived=false", "status=Unopened", "archived=true&status=Accepted"} {
		if r := e.Call(t, "GET", "/api/flows?"+q, webtest.TokA, ""); r.Status != 200 {
			t.Errorf("?%s: %d %s", q, r.Status, r.Body)
		}
	}
	r := e.Call(t, "GET", "/api/flows", webtest.TokA, "").JSON(t)
	item := r["data"].([]any)[0].(map[string]any)
	if webtest.KeysOf(item) != "archived,createdAt,flowDefinitionId,flowNumber,id,nationalId,organizationId,referenceId,sandbox,status,updatedAt" ||
		item["id"] != id || item["status"] != "Unopened" || item["nationalId"] != "ID-12345" || item["archived"] != false ||
		item["organizationId"] != webtest.OrgA || item["flowNumber"] != 1.0 || r["has_more"] != false {
		t.Fatalf("list %v", r)
	}
}

func TestCancelEndsTheProcess(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.Create(t, webtest.TokA, map[string]any{"webhookUrl": "https://hooks.example/h"})
	r := e.Call(t, "POST", "/api/flows/"+id+"/cancel", webtest.TokA, "")
	if r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	f := r.JSON(t)["flow"].(map[string]any)
	if f["status"] != "cancelled" || f["version"] != 2.0 || fmt.Sprint(f["actions"]) != "[read]" ||
		f["consent"].(map[string]any)["status"] != "Unopened" {
		t.Fatalf("cancelled flow %v", f)
	}
	if r := e.Call(t, "POST", "/api/flows/"+id+"/cancel", webtest.TokA, ""); r.Status != 409 {
		t.Fatalf("second cancel: %d %s", r.Status, r.Body)
	}
	active := e.Call(t, "GET", "/api/flows", webtest.TokA, "").JSON(t)["data"].([]any)
	archived := e.Call(t, "GET", "/api/flows?archived=true", webtest.TokA, "").JSON(t)["data"].([]any)
	if len(active) != 0 || len(archived) != 1 || archived[0].(map[string]any)["archived"] != true {
		t.Fatalf("active %v archived %v", active, archived)
	}
	var kinds string
	if err := e.Pool.QueryRow(context.Background(), `select string_agg(kind || ':' || version || ':' || flow_status, ',' order by id) from test_events`).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if kinds != "flow.created:1:active,flow.cancelled:2:cancelled" {
		t.Fatalf("events %s", kinds)
	}
	if n := e.Count(t, `select count(*) from flow_tasks where flow_id = $1 and task_type = 'consent' and status = 'cancelled'`, id); n != 1 {
		t.Fatal("the consent task was not cancelled")
	}
	if n := e.Count(t, `select count(*) from flow_tasks where flow_id = $1 and task_type = 'send-initiate-webhook'`, id); n != 2 {
		t.Fatalf("%d delivery tasks, want one per event", n)
	}
}

func TestDeleteRemovesEverythingAndLogsIt(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.Create(t, webtest.TokA, map[string]any{"webhookUrl": "https://hooks.example/h"})
	keep := e.Create(t, webtest.TokA, nil)
	var taskID string
	if err := e.Pool.QueryRow(context.Background(), `select id::text from flow_tasks where flow_id = $1 and task_type = 'send-initiate-webhook'`, id).Scan(&taskID); err != nil {
		t.Fatal(err)
	}
	if err := taskreports.New(e.Pool).TaskFailing(context.Background(), webtest.OrgA, taskID, "hooks.example: connection refused"); err != nil {
		t.Fatal(err)
	}
	r := e.Call(t, "DELETE", "/api/flows/"+id, webtest.TokA, "")
	if r.Status != 200 || webtest.KeysOf(r.JSON(t)) != "flowId,referenceId,status" {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if d := r.JSON(t); d["status"] != "deleted" || d["flowId"] != id || d["referenceId"] != "ACME-1" {
		t.Fatalf("delete body %v", d)
	}
	if r := e.Call(t, "DELETE", "/api/flows/"+id, webtest.TokA, ""); r.Status != 404 {
		t.Fatalf("second delete: %d", r.Status)
	}
	if r := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, ""); r.Status != 404 {
		t.Fatalf("get after delete: %d", r.Status)
	}
	for _, table := range []string{"flows where id", "flow_tasks where flow_id", "flow_incidents where flow_id", "consent_requests where flow_id"} {
		if n := e.Count(t, `select count(*) from `+table+` = $1`, id); n != 0 {
			t.Errorf("%d rows left in %s", n, table)
		}
	}
	var flowID, ref, by string
	if err := e.Pool.QueryRow(context.Background(), `select flow_id::text, reference_id, deleted_by from flow_deletions where organization_id = $1`, webtest.OrgA).Scan(&flowID, &ref, &by); err != nil {
		t.Fatal(err)
	}
	if flowID != id || ref != "ACME-1" || by != "client-a" {
		t.Fatalf("deletion log %s %s %s", flowID, ref, by)
	}
	var kinds string
	if err := e.Pool.QueryRow(context.Background(), `select string_agg(kind || ':' || task_id, ',' order by id) from test_events where flow_id = $1`, id).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(kinds, "flow.created:") || !strings.HasSuffix(kinds, ",cancel-pending:,flow.deleted:") {
		t.Fatalf("events %s: want created, then pending events cancelled, then flow.deleted", kinds)
	}
	dels, more, err := e.Flows.Deletions(context.Background(), webtest.OrgA, 10, "")
	if err != nil || more || len(dels) != 1 || dels[0].FlowID != id {
		t.Fatalf("Deletions: %v %v %v", dels, more, err)
	}
	if r := e.Call(t, "GET", "/api/flows/"+keep, webtest.TokA, ""); r.Status != 200 {
		t.Fatalf("the other flow: %d", r.Status)
	}
	// A flow without a webhook has its flow.deleted for the events API, with nowhere to deliver it.
	e.Call(t, "DELETE", "/api/flows/"+keep, webtest.TokADelete, "")
	if n := e.Count(t, `select count(*) from test_events where flow_id = $1 and kind = 'flow.deleted' and url = ''`, keep); n != 1 {
		t.Fatal("no flow.deleted event, or one with a URL, for a flow without webhookUrl")
	}
}

func TestTheNationalIDIsNotStoredInClear(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	const nationalID, lastName = "SECRETID-XYZ987", "Quixotezzz"
	id := e.Create(t, webtest.TokA, map[string]any{"nationalId": nationalID, "lastName": lastName})
	var row string
	if err := e.Pool.QueryRow(context.Background(), `select f::text || coalesce((select string_agg(k::text, '') from api_idempotency_keys k), '')
		|| (select string_agg(c::text, '') from consent_requests c) from flows f where id = $1`, id).Scan(&row); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{nationalID, lastName, fmt.Sprintf("%x", nationalID), fmt.Sprintf("%x", lastName)} {
		if strings.Contains(strings.ToLower(row), strings.ToLower(secret)) {
			t.Fatalf("%q is stored readable: %s", secret, row)
		}
	}
	// Yet the API shows it to its organization.
	if d := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "").JSON(t)["flow"].(map[string]any)["data"].(map[string]any); d["nationalId"] != nationalID || d["lastName"] != lastName {
		t.Fatalf("data %v", d)
	}
}
