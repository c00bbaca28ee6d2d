package web

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/modules/identity"
)

const tokADefinitionsRead = "token-a-definitions-read"

func init() {
	testPrincipals[tokADefinitionsRead] = identity.Principal{OrganizationID: orgA, ClientID: "client-a-defs",
		Scopes: []string{identity.ScopeDefinitionsRead, identity.ScopeFlowsWrite}}
}

// draftBody is a valid definition body with optional overrides.
func draftBody(overrides map[string]any) string {
	m := map[string]any{
		"versionTag":     "DOC-1",
		"title":          map[string]string{"en": "Share your income", "nb": "Del inntekten din"},
		"purpose":        map[string]string{"en": "We check it.\n\n- Salary", "nb": "Vi sjekker den.\n\n- Lønn"},
		"dataCategories": []map[string]string{{"en": "Income", "nb": "Inntekt"}},
		"validity":       "P90D",
		"assuranceLevel": "high",
	}
	for k, v := range overrides {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func decodeDefinition(t *testing.T, r response) FlowDefinition {
	t.Helper()
	var d FlowDefinition
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDefinitionsAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t)

	r := e.call(t, "GET", "/api/flow-definitions", tokA, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"id":"consent"`) {
		t.Fatalf("list of a new organization: %d %s", r.status, r.body)
	}

	r = e.call(t, "POST", "/api/flow-definitions", tokA, draftBody(map[string]any{"id": "mortgage"}))
	if r.status != http.StatusCreated || r.header.Get("Location") != "/api/flow-definitions/mortgage/versions/1" {
		t.Fatalf("create: %d %v %s", r.status, r.header, r.body)
	}
	v1 := decodeDefinition(t, r)
	if v1.Version != 1 || v1.Recipient != "Test Bank" || *v1.Validity != "P90D" || v1.AssuranceLevel != "high" ||
		len(v1.TextSHA256) != 64 || v1.PublishedBy != "client-a" || v1.Default || v1.RetiredAt != nil {
		t.Fatalf("created %+v", v1)
	}
	if r := e.call(t, "POST", "/api/flow-definitions", tokA, draftBody(map[string]any{"id": "mortgage"})); r.status != http.StatusConflict {
		t.Fatalf("create again: %d %s", r.status, r.body)
	}

	r = e.call(t, "POST", "/api/flow-definitions/mortgage/versions", tokA,
		draftBody(map[string]any{"title": map[string]string{"en": "Share your income, v2", "nb": "Del inntekten, v2"}, "validity": nil, "versionTag": nil}))
	if r.status != http.StatusCreated || r.header.Get("Location") != "/api/flow-definitions/mortgage/versions/2" {
		t.Fatalf("publish: %d %s", r.status, r.body)
	}
	if v2 := decodeDefinition(t, r); v2.Version != 2 || v2.LatestVersion != 2 || v2.Validity != nil || v2.VersionTag != nil || v2.TextSHA256 == v1.TextSHA256 {
		t.Fatalf("published %+v", v2)
	}
	if got := decodeDefinition(t, e.call(t, "GET", "/api/flow-definitions/mortgage", tokADefinitionsRead, "")); got.Version != 2 {
		t.Fatalf("latest is version %d", got.Version)
	}
	if got := decodeDefinition(t, e.call(t, "GET", "/api/flow-definitions/mortgage/versions/1", tokA, "")); got.Title != v1.Title || got.TextSHA256 != v1.TextSHA256 || got.LatestVersion != 2 {
		t.Fatalf("version 1 after publishing 2: %+v", got)
	}
	for _, path := range []string{"/api/flow-definitions/mortgage/versions/3", "/api/flow-definitions/mortgage/versions/x",
		"/api/flow-definitions/nope", "/api/flow-definitions/Mortgage"} {
		if r := e.call(t, "GET", path, tokA, ""); r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d", path, r.status)
		}
	}
	// Another organization sees none of it.
	if r := e.call(t, "GET", "/api/flow-definitions/mortgage", tokB, ""); r.status != http.StatusNotFound {
		t.Fatalf("another organization's definition: %d", r.status)
	}

	r = e.call(t, "POST", "/api/flow-definitions/mortgage/retire", tokA, "")
	if d := decodeDefinition(t, r); r.status != http.StatusOK || d.RetiredAt == nil || d.Version != 2 {
		t.Fatalf("retire: %d %s", r.status, r.body)
	}
	if r := e.call(t, "POST", "/api/flow-definitions/mortgage/versions", tokA, draftBody(nil)); r.status != http.StatusConflict {
		t.Fatalf("publish to a retired definition: %d", r.status)
	}
	if r := e.call(t, "POST", "/api/flow-definitions/consent/retire", tokA, ""); r.status != http.StatusConflict {
		t.Fatalf("retire the default: %d", r.status)
	}
	if r := e.call(t, "POST", "/api/flows", tokA, createBody(map[string]any{"flowDefinitionId": "mortgage"})); r.status != http.StatusConflict {
		t.Fatalf("a flow on a retired definition: %d %s", r.status, r.body)
	}
}

func TestDefinitionsNeedTheirScopes(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	for _, c := range []struct{ method, path, token, body string }{
		{"GET", "/api/flow-definitions", tokARead, ""},
		{"GET", "/api/flow-definitions/consent", tokAWrite, ""},
		{"POST", "/api/flow-definitions", tokADefinitionsRead, draftBody(map[string]any{"id": "x"})},
		{"POST", "/api/flow-definitions/consent/versions", tokADefinitionsRead, draftBody(nil)},
		{"POST", "/api/flow-definitions/consent/retire", tokADefinitionsRead, ""},
	} {
		if r := e.call(t, c.method, c.path, c.token, c.body); r.status != http.StatusForbidden {
			t.Errorf("%s %s without its scope: %d", c.method, c.path, r.status)
		}
	}
	if r := e.call(t, "GET", "/api/flow-definitions", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("without a token: %d", r.status)
	}
}

func TestABadDefinitionNamesEveryField(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	long := strings.Repeat("x", 10001)
	tests := []struct {
		name string
		path string
		body string
		want []string
	}{
		{"empty titles, a long purpose, a missing language", "/api/flow-definitions",
			draftBody(map[string]any{"id": "new-one", "title": map[string]string{"en": "", "nb": ""},
				"purpose": map[string]string{"en": long}, "assuranceLevel": "very"}),
			[]string{"title.en", "title.nb", "purpose.en", "purpose.nb", "assuranceLevel"}},
		{"a bad id and validity", "/api/flow-definitions", draftBody(map[string]any{"id": "Not a slug", "validity": "3 months"}),
			[]string{"id", "validity"}},
		{"the id the console's form has", "/api/flow-definitions", draftBody(map[string]any{"id": "new"}), []string{"id"}},
		{"a wrong type", "/api/flow-definitions/consent/versions", draftBody(map[string]any{"dataCategories": "Income", "title": map[string]string{"en": "t"}}),
			[]string{"dataCategories", "title.nb"}},
		{"an unknown member", "/api/flow-definitions/consent/versions", draftBody(map[string]any{"html": "<b>"}), []string{"html"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, "POST", tt.path, tokA, tt.body)
			got := r.fields(t)
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if r.status != http.StatusBadRequest || !slices.Equal(got, want) {
				t.Fatalf("%d fields %v, want %v: %s", r.status, got, want, r.body)
			}
		})
	}
	if n := e.count(t, `select count(*) from consent_definition_versions where definition_id <> 'consent'`); n != 0 {
		t.Fatalf("bad input stored %d versions", n)
	}
}

func TestAFlowPinsItsDefinitionVersion(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	if r := e.call(t, "POST", "/api/flow-definitions", tokA, draftBody(map[string]any{"id": "mortgage"})); r.status != http.StatusCreated {
		t.Fatalf("create definition: %d %s", r.status, r.body)
	}
	if r := e.call(t, "POST", "/api/flow-definitions/mortgage/versions", tokA, draftBody(map[string]any{"versionTag": "DOC-2"})); r.status != http.StatusCreated {
		t.Fatalf("publish: %d %s", r.status, r.body)
	}
	tests := []struct {
		name                       string
		body                       map[string]any
		definition, process, label string
		tag                        any
	}{
		{"the default", nil, "consent", "consent:1", "1", nil},
		{"the latest", map[string]any{"flowDefinitionId": "mortgage"}, "mortgage", "mortgage:2", "2", "DOC-2"},
		{"a version", map[string]any{"flowDefinitionId": "mortgage", "flowDefinitionVersion": 1}, "mortgage", "mortgage:1", "1", "DOC-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := e.create(t, tokA, tt.body)
			f := e.call(t, "GET", "/api/flows/"+id, tokA, "").json(t)["flow"].(map[string]any)
			meta := f["_meta"].(map[string]any)
			if f["flowDefinitionId"] != tt.definition || meta["processDefinitionId"] != tt.process ||
				meta["processVersion"] != tt.label || f["versionTag"] != tt.tag {
				t.Fatalf("flow %v %v %v", f["flowDefinitionId"], meta, f["versionTag"])
			}
			consent := f["consent"].(map[string]any)
			for _, k := range []string{"textSha256", "language", "assuranceLevel", "validUntil"} {
				if v, ok := consent[k]; !ok || v != nil {
					t.Errorf("undecided consent.%s = %v, want null", k, v)
				}
			}
		})
	}
	list := e.call(t, "GET", "/api/flows?limit=3", tokA, "").json(t)["data"].([]any)
	if got := list[0].(map[string]any)["flowDefinitionId"]; got != "mortgage" {
		t.Fatalf("the newest list item's flowDefinitionId = %v", got)
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"flowDefinitionId": "unknown"}, "flowDefinitionId"},
		{map[string]any{"flowDefinitionId": "mortgage", "flowDefinitionVersion": 9}, "flowDefinitionVersion"},
		{map[string]any{"flowDefinitionVersion": -1}, "flowDefinitionVersion"},
		{map[string]any{"flowDefinitionId": strings.Repeat("a", 65)}, "flowDefinitionId"},
	} {
		r := e.call(t, "POST", "/api/flows", tokA, createBody(c.body))
		if r.status != http.StatusBadRequest || !slices.Equal(r.fields(t), []string{c.field}) {
			t.Errorf("%v: %d %s", c.body, r.status, r.body)
		}
	}
	if n := e.count(t, `select count(*) from flows`); n != 3 {
		t.Fatalf("%d flows, want the three created", n)
	}
}

// TestTheLongestDefinitionFits: two purposes of 10 000 four-byte
// characters are over the API's usual 64 KiB, and valid.
func TestTheLongestDefinitionFits(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	long := strings.Repeat("𝄞", 10000)
	body := draftBody(map[string]any{"id": "long", "purpose": map[string]string{"en": long, "nb": long}})
	if len(body) <= 64<<10 {
		t.Fatalf("the body is only %d bytes", len(body))
	}
	if r := e.call(t, "POST", "/api/flow-definitions", tokA, body); r.status != http.StatusCreated {
		t.Fatalf("the longest definition: %d %s", r.status, r.body)
	}
	if r := e.call(t, "POST", "/api/flows", tokA, createBody(map[string]any{"referenceName": strings.Repeat("x", 70<<10)})); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a create over 64 KiB: %d", r.status)
	}
}
