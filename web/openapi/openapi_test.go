package openapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/flowd/flowd/views/pages"
)

func TestTheDocumentLoadsAndIsValid(t *testing.T) {
	t.Parallel()
	fromYAML, err := Written()
	if err != nil {
		t.Fatal(err)
	}
	if !fromYAML.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1", fromYAML.OpenAPI)
	}
	raw, err := JSON(DefaultBaseURL)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(raw) {
		t.Fatal("JSON gave invalid JSON")
	}
	// Loaded without LoadData's validation: the one below covers it and
	// checks the examples against their schemas too.
	fromJSON, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	// The served JSON is the written YAML, member for member.
	a, _ := json.Marshal(fromYAML)
	b, _ := json.Marshal(fromJSON)
	if string(a) != string(b) {
		t.Fatal("the JSON form differs from the YAML document")
	}
	if err := fromJSON.Validate(t.Context(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("an example does not match its schema: %v", err)
	}
}

func TestTheServiceBaseURLReplacesTheDefault(t *testing.T) {
	t.Parallel()
	raw, err := JSON("https://consent.bank.example/")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), DefaultBaseURL) {
		t.Fatal("the default base URL is still in the document")
	}
	doc, err := Load("https://consent.bank.example")
	if err != nil {
		t.Fatal(err)
	}
	if got := doc.Servers[0].URL; got != "https://consent.bank.example" {
		t.Fatalf("servers[0].url = %q", got)
	}
	flows := doc.Components.SecuritySchemes["oauth2"].Value.Flows.ClientCredentials
	if flows.TokenURL != "https://consent.bank.example/oauth/token" {
		t.Fatalf("tokenUrl = %q", flows.TokenURL)
	}
}

// operations lists every operation of the document with its path and method.
func operations(doc *openapi3.T) map[string]*openapi3.Operation {
	ops := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops[method+" "+path] = op
		}
	}
	return ops
}

func TestEveryOperationIsCompletelyDescribed(t *testing.T) {
	t.Parallel()
	doc, err := Written()
	if err != nil {
		t.Fatal(err)
	}
	ops := operations(doc)
	for _, want := range []string{
		"POST /api/flows", "GET /api/flows", "GET /api/flows/{flowId}", "DELETE /api/flows/{flowId}",
		"POST /api/flows/{flowId}/cancel", "GET /api/tasks", "GET /api/openapi.json", "POST /oauth/token",
	} {
		if ops[want] == nil {
			t.Errorf("%s is not in the document", want)
		}
	}
	scopes := doc.Components.SecuritySchemes["oauth2"].Value.Flows.ClientCredentials.Scopes
	public := map[string]bool{"GET /api/openapi.json": true, "GET /schemas/consent-record.json": true, "POST /oauth/token": true,
		"POST /oauth/revoke": true, "POST /oauth/introspect": true, "POST /api/receipts/verify": true,
		"GET /webhooks/{organizationId}/keys": true, "GET /.well-known/ssf-configuration": true}
	ids := map[string]string{}
	for name, op := range ops {
		if op.OperationID == "" || op.Summary == "" || op.Description == "" || len(op.Tags) == 0 {
			t.Errorf("%s: needs an operationId, summary, description and tag", name)
		}
		if other, ok := ids[op.OperationID]; ok {
			t.Errorf("%s and %s share the operationId %q", name, other, op.OperationID)
		}
		ids[op.OperationID] = name
		if op.Security == nil {
			t.Errorf("%s: no security requirement (write security: [] for a public operation)", name)
			continue
		}
		if !public[name] {
			// A bearer token or a DPoP-bound one (RFC 9449), with the same scope.
			if len(*op.Security) != 2 || len((*op.Security)[0]["oauth2"]) != 1 ||
				!slices.Equal((*op.Security)[1]["dpop"], (*op.Security)[0]["oauth2"]) {
				t.Errorf("%s: needs exactly one OAuth scope, then DPoP with the same scope", name)
			}
			for _, s := range (*op.Security)[0]["oauth2"] {
				if _, ok := scopes[s]; !ok {
					t.Errorf("%s: unknown scope %q", name, s)
				}
			}
			for _, code := range []int{401, 403, 429, 500, 503} {
				if op.Responses.Status(code) == nil {
					t.Errorf("%s: does not document %d", name, code)
				}
			}
			// Every answer to a request with a valid token carries the client's rate limit.
			for code, r := range op.Responses.Map() {
				if code != "401" && (r.Value.Headers["RateLimit-Policy"] == nil || r.Value.Headers["RateLimit"] == nil) {
					t.Errorf("%s %s: RateLimit-Policy and RateLimit are not documented", name, code)
				}
			}
		}
		for _, p := range op.Parameters {
			if p.Value.Example == nil || p.Value.Description == "" {
				t.Errorf("%s: parameter %s needs a description and an example", name, p.Value.Name)
			}
		}
		if op.RequestBody != nil {
			for mt, c := range op.RequestBody.Value.Content {
				if len(c.Examples) == 0 {
					t.Errorf("%s: request body %s has no example", name, mt)
				}
			}
		}
		for code, r := range op.Responses.Map() {
			// RFC 7009 2.2: a revocation's 200 has no body to read.
			// RFC 9110 15.3.5: a 204 has none; SSF's subject add answers 200 without one.
			if len(r.Value.Content) == 0 && code != "304" && code != "204" && !(name == "POST /oauth/revoke" && code == "200") &&
				!(name == "POST /ssf/subjects:add" && code == "200") {
				t.Errorf("%s %s: no body", name, code)
			}
			if r.Value.Headers["X-Request-Id"] == nil {
				t.Errorf("%s %s: X-Request-Id is not documented", name, code)
			}
			for mt, c := range r.Value.Content {
				if len(c.Examples) == 0 && c.Example == nil {
					t.Errorf("%s %s %s: no example", name, code, mt)
				}
				if strings.HasPrefix(name, "POST /oauth") || code < "400" {
					continue
				}
				if mt != "application/problem+json" {
					t.Errorf("%s %s: an API error must be application/problem+json, not %s", name, code, mt)
				}
			}
		}
	}
	if hook := doc.Webhooks["flowEvent"]; hook == nil || hook.Post == nil || hook.Post.RequestBody == nil {
		t.Fatal("no flowEvent webhook")
	}
}

func TestTheReferenceShowsEveryOperationInWrittenOrder(t *testing.T) {
	t.Parallel()
	raw, err := JSON(DefaultBaseURL)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Load(DefaultBaseURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Reference(doc, raw, DefaultBaseURL)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range p.Groups {
		for _, op := range g.Operations {
			got = append(got, op.ID)
			if len(op.Responses) == 0 || op.Auth == "" {
				t.Errorf("%s: responses or authorization missing", op.ID)
			}
		}
	}
	want := []string{"createFlow", "listFlows", "getFlow", "deleteFlow", "cancelFlow", "withdrawFlow", "recordFlowUse", "listFlowUses", "listTasks", "listFlowDefinitions",
		"createFlowDefinition", "getFlowDefinition", "publishFlowDefinitionVersion", "getFlowDefinitionVersion", "retireFlowDefinition",
		"listFlowAttachments", "getFlowAttachment", "getConsentRecord", "verifyReceipt", "checkReceiptSubject", "listEvents", "getEvent", "redeliverEvent",
		"listWebhookEndpoints", "createWebhookEndpoint", "getWebhookEndpoint", "updateWebhookEndpoint", "deleteWebhookEndpoint",
		"recoverWebhookEndpoint", "listWebhookRecoveries", "getWebhookRecovery", "recoverFlowWebhooks", "listFlowWebhookRecoveries", "getFlowWebhookRecovery",
		"listEventTypes", "sendWebhookEndpointTestEvent", "getWebhookSigningKeys",
		"createResource", "listResources", "getSSFConfiguration", "createSSFStream", "getSSFStreams", "updateSSFStream", "replaceSSFStream",
		"deleteSSFStream", "getSSFStreamStatus", "setSSFStreamStatus", "verifySSFStream", "addSSFSubject", "removeSSFSubject", "pollSSFStream", "erasePerson", "listErasures", "getErasure", "createToken", "revokeToken", "introspectToken", "getOpenAPIDocument", "getConsentRecordSchema"}
	slices.Sort(want)
	sorted := slices.Sorted(slices.Values(got))
	if !slices.Equal(sorted, want) {
		t.Fatalf("operations %v, want %v", got, want)
	}
	if got[0] != "createFlow" || got[1] != "listFlows" {
		t.Fatalf("operations not in written order: %v", got)
	}
	var intro []string
	for _, l := range p.Intro {
		intro = append(intro, l.ID)
	}
	for _, id := range []string{"authentication", "errors", "pagination", "idempotency", "webhooks"} {
		if !slices.Contains(intro, id) {
			t.Errorf("the overview has no %q section: %v", id, intro)
		}
	}
	var hooks []string
	for _, h := range p.Webhooks {
		hooks = append(hooks, h.ID)
		if h.RequestBody == nil {
			t.Errorf("webhook %s: no body shown", h.ID)
		}
		if !strings.Contains(h.Auth, "webhook-signature header") {
			t.Errorf("webhook %s: authorization %q does not name the signature header", h.ID, h.Auth)
		}
	}
	if !slices.Equal(hooks, []string{"webhook-flowevent", "webhook-endpointdisabled", "webhook-thinevent", "webhook-subjecterased", "webhook-subjecterasurerequested"}) {
		t.Fatalf("webhooks shown: %v, want flowEvent, endpointDisabled, thinEvent, subjectErased, subjectErasureRequested", hooks)
	}

	create := p.Groups[0].Operations[0]
	if create.Method != http.MethodPost || create.Path != "/api/flows" || !slices.Equal(create.Scopes, []string{"flows:write"}) {
		t.Fatalf("create: %+v", create)
	}
	var fields []string
	for _, f := range create.RequestBody.Fields {
		fields = append(fields, f.Name)
	}
	if strings.Join(fields, ",") != "nationalId,lastName,redirectUrl,webhookUrl,referenceName,flowDefinitionId,flowDefinitionVersion,parameters" {
		t.Fatalf("request fields in the wrong order: %v", fields)
	}
	created := create.Responses[0]
	if created.Status != "201 Created" || len(created.Bodies) != 1 {
		t.Fatalf("first response %+v", created)
	}
	if ex := created.Bodies[0].Examples[0].Body; !strings.HasPrefix(ex, "{\n  \"_links\": {\n    \"self\"") {
		t.Fatalf("the example lost its written order:\n%s", ex)
	}
	for _, r := range create.Responses {
		if strings.HasPrefix(r.Status, "404") {
			t.Fatal("create documents a 404 it never answers")
		}
		want := []pages.DocsLink{{ID: "problem-unprocessable", Title: DefaultBaseURL + "/docs#problem-unprocessable"},
			{ID: "problem-idempotency-key-reused", Title: DefaultBaseURL + "/docs#problem-idempotency-key-reused"}}
		if strings.HasPrefix(r.Status, "422") && !slices.Equal(r.Bodies[0].ProblemTypes, want) {
			t.Fatalf("422 problem types %v, want %v", r.Bodies[0].ProblemTypes, want)
		}
	}
}

// TestComponentNamesAreUniqueForGenerators: code generators make one type of
// each schema, parameter, header, request body and response, named after its
// component, so two components of one name (in any letter case) do not
// compile (oapi-codegen: "duplicate typename").
func TestComponentNamesAreUniqueForGenerators(t *testing.T) {
	t.Parallel()
	doc, err := Written()
	if err != nil {
		t.Fatal(err)
	}
	c := doc.Components
	seen := map[string]string{}
	add := func(kind string, names []string) {
		for _, name := range names {
			key := strings.ToLower(name)
			if other, ok := seen[key]; ok {
				t.Errorf("%s %q has the name of %s", kind, name, other)
			}
			seen[key] = kind + " " + name
		}
	}
	add("schema", sortedKeys(c.Schemas))
	add("parameter", sortedKeys(c.Parameters))
	add("header", sortedKeys(c.Headers))
	add("request body", sortedKeys(c.RequestBodies))
	add("response", sortedKeys(c.Responses))
	if len(seen) < 20 {
		t.Fatalf("only %d components", len(seen))
	}
}

// TestEveryComponentIsUsed: a component nothing refers to is dead weight that
// linters flag and generators either prune or emit for nothing.
func TestEveryComponentIsUsed(t *testing.T) {
	t.Parallel()
	var root map[string]any
	if err := json.Unmarshal(mustJSON(t), &root); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				used[ref] = true
			}
			if sec, ok := v["security"].([]any); ok {
				for _, req := range sec {
					for name := range req.(map[string]any) {
						used["#/components/securitySchemes/"+name] = true
					}
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(root)
	// webhookSignature tells a receiver how to verify a delivery; the
	// webhooks carry it as their required webhook-signature header rather
	// than as a security requirement, which ogen cannot generate for them.
	used["#/components/securitySchemes/webhookSignature"] = true
	n := 0
	for kind, group := range root["components"].(map[string]any) {
		for name := range group.(map[string]any) {
			n++
			if ref := "#/components/" + kind + "/" + name; !used[ref] {
				t.Errorf("%s is never used", ref)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d components", n)
	}
}

// TestTheDocumentIsCompleteForLinters holds what a linter requires of the
// whole document: a license, and security declared on every webhook. A
// webhook declares none required (ogen generates webhook code that does not
// compile with one): the receiver authenticates a delivery by its required
// webhook-signature header, which the scheme webhookSignature describes.
func TestTheDocumentIsCompleteForLinters(t *testing.T) {
	t.Parallel()
	doc, err := Written()
	if err != nil {
		t.Fatal(err)
	}
	if doc.Info.License == nil || doc.Info.License.Name == "" {
		t.Error("info has no license")
	}
	if doc.Components.SecuritySchemes["webhookSignature"] == nil {
		t.Error("no security scheme webhookSignature")
	}
	for name, item := range doc.Webhooks {
		for method, op := range item.Operations() {
			if op.Security == nil {
				t.Errorf("webhook %s %s declares no security", name, method)
			}
			if p := op.Parameters.GetByInAndName(openapi3.ParameterInHeader, "webhook-signature"); p == nil || !p.Required {
				t.Errorf("webhook %s %s does not require the webhook-signature header", name, method)
			}
		}
	}
}

func mustJSON(t *testing.T) []byte {
	t.Helper()
	raw, err := JSON(DefaultBaseURL)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
