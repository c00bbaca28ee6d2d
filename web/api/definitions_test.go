package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/web/api"
	"github.com/flowd/flowd/web/internal/webtest"
)

const tokADefinitionsRead = "token-a-definitions-read"

func init() {
	webtest.TestPrincipals[tokADefinitionsRead] = identity.Principal{OrganizationID: webtest.OrgA, ClientID: "client-a-defs",
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

func decodeDefinition(t *testing.T, r webtest.Response) api.FlowDefinition {
	t.Helper()
	var d api.FlowDefinition
	if err := json.Unmarshal(r.Body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDefinitionsAPI(t *testing.T) {
	t.Parallel()
	e := newAPI(t)

	r := e.Call(t, "GET", "/api/flow-definitions", webtest.TokA, "")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"id":"consent"`) {
		t.Fatalf("list of a new organization: %d %s", r.Status, r.Body)
	}

	r = e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "mortgage"}))
	if r.Status != http.StatusCreated || r.Header.Get("Location") != "/api/flow-definitions/mortgage/versions/1" {
		t.Fatalf("create: %d %v %s", r.Status, r.Header, r.Body)
	}
	v1 := decodeDefinition(t, r)
	if v1.Version != 1 || v1.Recipient != "Test Bank" || *v1.Validity != "P90D" || v1.AssuranceLevel != "high" ||
		len(v1.TextSHA256) != 64 || v1.PublishedBy != "client-a" || v1.Default || v1.RetiredAt != nil {
		t.Fatalf("created %+v", v1)
	}
	if r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "mortgage"})); r.Status != http.StatusConflict {
		t.Fatalf("create again: %d %s", r.Status, r.Body)
	}

	r = e.Call(t, "POST", "/api/flow-definitions/mortgage/versions", webtest.TokA,
		draftBody(map[string]any{"title": map[string]string{"en": "Share your income, v2", "nb": "Del inntekten, v2"}, "validity": nil, "versionTag": nil}))
	if r.Status != http.StatusCreated || r.Header.Get("Location") != "/api/flow-definitions/mortgage/versions/2" {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	if v2 := decodeDefinition(t, r); v2.Version != 2 || v2.LatestVersion != 2 || v2.Validity != nil || v2.VersionTag != nil || v2.TextSHA256 == v1.TextSHA256 {
		t.Fatalf("published %+v", v2)
	}
	if got := decodeDefinition(t, e.Call(t, "GET", "/api/flow-definitions/mortgage", tokADefinitionsRead, "")); got.Version != 2 {
		t.Fatalf("latest is version %d", got.Version)
	}
	if got := decodeDefinition(t, e.Call(t, "GET", "/api/flow-definitions/mortgage/versions/1", webtest.TokA, "")); got.Title != v1.Title || got.TextSHA256 != v1.TextSHA256 || got.LatestVersion != 2 {
		t.Fatalf("version 1 after publishing 2: %+v", got)
	}
	for _, path := range []string{"/api/flow-definitions/mortgage/versions/3", "/api/flow-definitions/mortgage/versions/x",
		"/api/flow-definitions/nope", "/api/flow-definitions/Mortgage"} {
		if r := e.Call(t, "GET", path, webtest.TokA, ""); r.Status != http.StatusNotFound {
			t.Errorf("GET %s: %d", path, r.Status)
		}
	}
	// Another organization sees none of it.
	if r := e.Call(t, "GET", "/api/flow-definitions/mortgage", webtest.TokB, ""); r.Status != http.StatusNotFound {
		t.Fatalf("another organization's definition: %d", r.Status)
	}

	r = e.Call(t, "POST", "/api/flow-definitions/mortgage/retire", webtest.TokA, "")
	if d := decodeDefinition(t, r); r.Status != http.StatusOK || d.RetiredAt == nil || d.Version != 2 {
		t.Fatalf("retire: %d %s", r.Status, r.Body)
	}
	if r := e.Call(t, "POST", "/api/flow-definitions/mortgage/versions", webtest.TokA, draftBody(nil)); r.Status != http.StatusConflict {
		t.Fatalf("publish to a retired definition: %d", r.Status)
	}
	if r := e.Call(t, "POST", "/api/flow-definitions/consent/retire", webtest.TokA, ""); r.Status != http.StatusConflict {
		t.Fatalf("retire the default: %d", r.Status)
	}
	if r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{"flowDefinitionId": "mortgage"})); r.Status != http.StatusConflict {
		t.Fatalf("a flow on a retired definition: %d %s", r.Status, r.Body)
	}
}

func TestDefinitionsNeedTheirScopes(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	for _, c := range []struct{ method, path, token, body string }{
		{"GET", "/api/flow-definitions", webtest.TokARead, ""},
		{"GET", "/api/flow-definitions/consent", webtest.TokAWrite, ""},
		{"POST", "/api/flow-definitions", tokADefinitionsRead, draftBody(map[string]any{"id": "x"})},
		{"POST", "/api/flow-definitions/consent/versions", tokADefinitionsRead, draftBody(nil)},
		{"POST", "/api/flow-definitions/consent/retire", tokADefinitionsRead, ""},
	} {
		if r := e.Call(t, c.method, c.path, c.token, c.body); r.Status != http.StatusForbidden {
			t.Errorf("%s %s without its scope: %d", c.method, c.path, r.Status)
		}
	}
	if r := e.Call(t, "GET", "/api/flow-definitions", "", ""); r.Status != http.StatusUnauthorized {
		t.Errorf("without a token: %d", r.Status)
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
		{"withdrawal consequences in one language", "/api/flow-definitions/consent/versions",
			draftBody(map[string]any{"withdrawalConsequences": map[string]string{"en": "We stop.", "nb": ""}}),
			[]string{"withdrawalConsequences.nb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Call(t, "POST", tt.path, webtest.TokA, tt.body)
			got := r.Fields(t)
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if r.Status != http.StatusBadRequest || !slices.Equal(got, want) {
				t.Fatalf("%d fields %v, want %v: %s", r.Status, got, want, r.Body)
			}
		})
	}
	if n := e.Count(t, `select count(*) from consent_definition_versions where definition_id <> 'consent'`); n != 0 {
		t.Fatalf("bad input stored %d versions", n)
	}
}

func TestAFlowPinsItsDefinitionVersion(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	if r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "mortgage"})); r.Status != http.StatusCreated {
		t.Fatalf("create definition: %d %s", r.Status, r.Body)
	}
	if r := e.Call(t, "POST", "/api/flow-definitions/mortgage/versions", webtest.TokA, draftBody(map[string]any{"versionTag": "DOC-2"})); r.Status != http.StatusCreated {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
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
			id := e.Create(t, webtest.TokA, tt.body)
			f := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, "").JSON(t)["flow"].(map[string]any)
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
	list := e.Call(t, "GET", "/api/flows?limit=3", webtest.TokA, "").JSON(t)["data"].([]any)
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
		r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(c.body))
		if r.Status != http.StatusBadRequest || !slices.Equal(r.Fields(t), []string{c.field}) {
			t.Errorf("%v: %d %s", c.body, r.Status, r.Body)
		}
	}
	if n := e.Count(t, `select count(*) from flows`); n != 3 {
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
	if r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, body); r.Status != http.StatusCreated {
		t.Fatalf("the longest definition: %d %s", r.Status, r.Body)
	}
	if r := e.Call(t, "POST", "/api/flows", webtest.TokA, webtest.CreateBody(map[string]any{"referenceName": strings.Repeat("x", 70<<10)})); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a create over 64 KiB: %d", r.Status)
	}
}

// TestADefinitionSaysWhatWithdrawingMeans: withdrawalConsequences is kept
// in both languages, shown, and hashed with the version's text; a version
// without it shows null and hashes as its text alone.
func TestADefinitionSaysWhatWithdrawingMeans(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "loan",
		"withdrawalConsequences": map[string]string{"en": "We can no longer assess your loan.", "nb": "Vi kan ikke lenger vurdere lånet."}}))
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	with := decodeDefinition(t, r)
	if with.WithdrawalConsequences == nil || with.WithdrawalConsequences.NB != "Vi kan ikke lenger vurdere lånet." {
		t.Fatalf("created %+v", with.WithdrawalConsequences)
	}
	r = e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "loan-plain"}))
	without := decodeDefinition(t, r)
	if r.Status != http.StatusCreated || without.WithdrawalConsequences != nil || !strings.Contains(string(r.Body), `"withdrawalConsequences":null`) {
		t.Fatalf("a definition without consequences: %d %s", r.Status, r.Body)
	}
	if with.TextSHA256 == without.TextSHA256 {
		t.Error("the consequences are not part of the text's hash")
	}
	got := decodeDefinition(t, e.Call(t, "GET", "/api/flow-definitions/loan", webtest.TokA, ""))
	if got.WithdrawalConsequences == nil || *got.WithdrawalConsequences != *with.WithdrawalConsequences || got.TextSHA256 != with.TextSHA256 {
		t.Errorf("read back %+v", got)
	}
}
