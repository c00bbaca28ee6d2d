package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/web/api"
	"github.com/flowd/flowd/web/internal/webtest"
)

const incomeURI = "https://api.tax.example/income"

// registerResource registers uri as organization B's (the data holder's)
// and returns it as the API answered.
func (e *apiEnv) registerResource(t *testing.T, uri string) api.ResourceJSON {
	t.Helper()
	r := e.Call(t, "POST", "/api/resources", webtest.TokB, `{"uri":"`+uri+`","name":"Income records"}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("register %s: %d %s", uri, r.Status, r.Body)
	}
	var out api.ResourceJSON
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDataHoldersRegisterResources: organization B registers a resource,
// lists it, and neither it nor anyone else may register the URI again;
// bad URIs and the missing scope are refused, and organization A's list
// stays empty. Each change is audited.
func TestDataHoldersRegisterResources(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	for _, c := range []struct {
		name, token, body string
		status            int
		field             string
	}{
		{"without resources:manage", webtest.TokARead, `{"uri":"https://x.example","name":"X"}`, http.StatusForbidden, ""},
		{"a relative uri", webtest.TokB, `{"uri":"/income","name":"X"}`, http.StatusBadRequest, "uri"},
		{"a fragment", webtest.TokB, `{"uri":"https://x.example/a#b","name":"X"}`, http.StatusBadRequest, "uri"},
		{"no name", webtest.TokB, `{"uri":"https://x.example/a"}`, http.StatusBadRequest, "name"},
		{"an unknown field", webtest.TokB, `{"uri":"https://x.example/a","name":"X","owner":"me"}`, http.StatusBadRequest, "owner"},
	} {
		r := e.Call(t, "POST", "/api/resources", c.token, c.body)
		if r.Status != c.status || (c.field != "" && !slices.Contains(r.Fields(t), c.field)) {
			t.Errorf("%s: %d %s, want %d naming %q", c.name, r.Status, r.Body, c.status, c.field)
		}
	}
	got := e.registerResource(t, incomeURI)
	if got.URI != incomeURI || got.Name != "Income records" || got.ID == "" || got.CreatedBy != "client:client-b" {
		t.Fatalf("registered: %+v", got)
	}
	for _, token := range []string{webtest.TokA, webtest.TokB} {
		if r := e.Call(t, "POST", "/api/resources", token, `{"uri":"`+incomeURI+`","name":"Again"}`); r.Status != http.StatusConflict {
			t.Errorf("registering the uri again: %d %s", r.Status, r.Body)
		}
	}
	list := e.Call(t, "GET", "/api/resources", webtest.TokB, "")
	if list.Status != http.StatusOK || !strings.Contains(string(list.Body), got.ID) {
		t.Fatalf("B's list: %d %s", list.Status, list.Body)
	}
	if r := e.Call(t, "GET", "/api/resources", webtest.TokA, ""); r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != `{"data":[]}` {
		t.Fatalf("A's list: %d %s", r.Status, r.Body)
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'audit' and status = 'resource.create' and reference_id = $1`, incomeURI); n != 1 {
		t.Fatalf("%d audit entries of the registration", n)
	}
}

// TestDefinitionsNameResourcesAndParameters: a definition names a
// registered resource and declares a parameter; an unregistered resource,
// an undeclared parameter and a missing declared one are 422 naming the
// field. A flow's parameters are on the flow, on the consent's text hash
// (which anyone can rebuild from the definition and the flow) and in the
// receipt.
func TestDefinitionsNameResourcesAndParameters(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	e.registerResource(t, incomeURI)
	params := []map[string]any{{"name": "incomeYear", "label": map[string]string{"en": "Income year", "nb": "Inntektsår"}}}

	unknown := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "income",
		"resources": []string{incomeURI, "https://api.bank.example/balances"}, "parameters": params}))
	if unknown.Status != http.StatusUnprocessableEntity || !slices.Equal(unknown.Fields(t), []string{"resources[1]"}) {
		t.Fatalf("an unregistered resource: %d %s", unknown.Status, unknown.Body)
	}
	bad := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "income",
		"parameters": []map[string]any{{"name": "1year", "label": map[string]string{"en": "Year"}}}}))
	if bad.Status != http.StatusBadRequest || !slices.Equal(bad.Fields(t), []string{"parameters[0].name", "parameters[0].label.nb"}) {
		t.Fatalf("a bad parameter: %d %s", bad.Status, bad.Body)
	}
	created := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "income",
		"resources": []string{incomeURI}, "parameters": params}))
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	def := decodeDefinition(t, created)
	if !slices.Equal(def.Resources, []string{incomeURI}) || len(def.Parameters) != 1 || def.Parameters[0].Label.NB != "Inntektsår" {
		t.Fatalf("the definition: %s", created.Body)
	}

	for _, c := range []struct {
		name   string
		params map[string]any
		fields []string
	}{
		{"none given", nil, []string{"parameters.incomeYear"}},
		{"an undeclared one", map[string]any{"incomeYear": "2025", "account": "1234"}, []string{"parameters.account"}},
	} {
		body := map[string]any{"flowDefinitionId": "income"}
		if c.params != nil {
			body["parameters"] = c.params
		}
		r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(body))
		if r.Status != http.StatusUnprocessableEntity || !slices.Equal(r.Fields(t), c.fields) {
			t.Errorf("%s: %d %s, want 422 naming %v", c.name, r.Status, r.Body, c.fields)
		}
	}
	if n := e.Count(t, `select count(*) from flows`); n != 0 {
		t.Fatalf("refused creates left %d flows", n)
	}

	id := e.Create(t, webtest.TokA, map[string]any{"flowDefinitionId": "income", "parameters": map[string]any{"incomeYear": " 2025 "}})
	flow := e.flowJSON(t, id)
	if p, _ := flow["parameters"].(map[string]any); p["incomeYear"] != "2025" {
		t.Fatalf("the flow's parameters: %v", flow["parameters"])
	}
	e.decideWithEvidence(t, id, true)
	flow = e.flowJSON(t, id)
	got := flow["consent"].(map[string]any)["textSha256"]

	v, err := consent.NewDefinitions(e.Pool, webtest.TestOrganizations{}).Version(t.Context(), webtest.OrgA, "income", 1)
	if err != nil {
		t.Fatal(err)
	}
	text := string(v.CanonicalTextWith(map[string]string{"incomeYear": "2025"}))
	if !strings.Contains(text, `"parameterValues":{"incomeYear":"2025"},"parameters":[{"label":{"en":"Income year","nb":"Inntektsår"},"name":"incomeYear"}]`) ||
		!strings.Contains(text, `"resources":["`+incomeURI+`"]`) {
		t.Fatalf("the canonical text: %s", text)
	}
	sum := sha256.Sum256([]byte(text))
	if got != hex.EncodeToString(sum[:]) || got == def.TextSHA256 {
		t.Fatalf("the decision's text hash %v; want %x, not the version's own %s", got, sum, def.TextSHA256)
	}
	claims := e.receiptClaims(t, e.attachments(t, id)[0])
	if p, _ := claims["parameters"].(map[string]any); p["incomeYear"] != "2025" {
		t.Fatalf("the receipt's parameters: %v", claims)
	}
}
