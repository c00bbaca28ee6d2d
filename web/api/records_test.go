package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/flowd/flowd/web/internal/webtest"
)

// servedSchema fetches /schemas/consent-record.json as any client would and
// compiles it, checking that it is served as a cacheable JSON Schema.
func (e *apiEnv) servedSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	r := e.Call(t, "GET", "/schemas/consent-record.json", "", "")
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/schema+json" ||
		!strings.Contains(r.Header.Get("Cache-Control"), "max-age=") || r.Header.Get("ETag") == "" {
		t.Fatalf("the schema: %d %v", r.Status, r.Header)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := doc.(map[string]any)["$id"].(string)
	if id != "https://flowd.example/schemas/consent-record.json" {
		t.Fatalf("the schema's $id is %q, not under the base URL", id)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(id)
	if err != nil {
		t.Fatalf("the served schema does not compile: %v", err)
	}
	return s
}

// TestTheConsentRecordFollowsTheFlow: a flow's consent record, fetched
// through the API at each step (asked, accepted, withdrawn by the
// organization, erased), validates against the schema flowd serves, says
// what happened in DPV's states, names the person by a pseudonym only and,
// once erased, carries nothing personal. Another organization's flow is a
// 404, as every flow read is.
func TestTheConsentRecordFollowsTheFlow(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	schema := e.servedSchema(t)
	e.registerResource(t, incomeURI)
	params := []map[string]any{{"name": "incomeYear", "label": map[string]string{"en": "Income year", "nb": "Inntektsår"}}}
	if r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "income", "assuranceLevel": "substantial",
		"resources": []string{incomeURI}, "parameters": params})); r.Status != http.StatusCreated {
		t.Fatalf("create the definition: %d %s", r.Status, r.Body)
	}
	id := e.Create(t, webtest.TokA, map[string]any{"flowDefinitionId": "income", "parameters": map[string]any{"incomeYear": "2025"}})

	recordOf := func(step string) map[string]any {
		t.Helper()
		r := e.Call(t, "GET", "/api/flows/"+id+"/consent-record", webtest.TokA, "")
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", step, r.Status, r.Body)
		}
		var doc any
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(doc); err != nil {
			t.Fatalf("%s: the record does not validate against the served schema: %v\n%s", step, err, r.Body)
		}
		for _, personal := range []string{"ID-12345", "Nordmann"} {
			if bytes.Contains(r.Body, []byte(personal)) {
				t.Fatalf("%s: the record shows %q: %s", step, personal, r.Body)
			}
		}
		return doc.(map[string]any)
	}
	states := func(rec map[string]any) string {
		var out []string
		for _, ev := range rec["events"].([]any) {
			out = append(out, ev.(map[string]any)["event_state"].(string))
		}
		return strings.Join(out, " ")
	}

	asked := recordOf("asked")
	if asked["consent_status"] != "ConsentRequested" || asked["record_id"] != id || asked["language"] != nil ||
		asked["pii_principal_id"] == nil || len(asked["receipt_ids"].([]any)) != 0 {
		t.Fatalf("asked: %v", asked)
	}
	e.decideWithEvidence(t, id, true)
	accepted := recordOf("accepted")
	purpose := accepted["purposes"].([]any)[0].(map[string]any)
	recipients := purpose["recipients"].([]any)
	holder := recipients[len(recipients)-1].(map[string]any)
	flow := e.flowJSON(t, id)
	switch {
	case accepted["consent_status"] != "ConsentGiven" || states(accepted) != "ConsentRequested ConsentRequested ConsentGiven":
		t.Fatalf("accepted: %s, events %s", accepted["consent_status"], states(accepted))
	case accepted["pii_principal_id"] != asked["pii_principal_id"]:
		t.Fatalf("the pseudonym changed from %v to %v", asked["pii_principal_id"], accepted["pii_principal_id"])
	case accepted["notice"].(map[string]any)["text_sha256"] != flow["consent"].(map[string]any)["textSha256"]:
		t.Fatalf("the notice's hash %v is not the decision's %v", accepted["notice"], flow["consent"])
	case accepted["language"] != "nb" || accepted["valid_until"] == nil || purpose["lawful_basis"] != "dpv:Consent":
		t.Fatalf("accepted: %v", accepted)
	case holder["role"] != "data_holder" || holder["uri"] != incomeURI || holder["organization_id"] != webtest.OrgB:
		t.Fatalf("the data holder among the recipients: %v", recipients)
	case accepted["parameters"].(map[string]any)["incomeYear"] != "2025" || len(accepted["receipt_ids"].([]any)) != 1:
		t.Fatalf("accepted: %v", accepted)
	case accepted["collection_method"].(map[string]any)["identity_assurance"].(map[string]any)["level"] != "substantial":
		t.Fatalf("collection method: %v", accepted["collection_method"])
	}
	receipt := e.receiptClaims(t, e.attachments(t, id)[0])
	if receipt["subject"] != accepted["pii_principal_id"] || receipt["jti"] != accepted["receipt_ids"].([]any)[0] {
		t.Fatalf("the record's principal and receipt %v, %v are not the receipt's %v, %v",
			accepted["pii_principal_id"], accepted["receipt_ids"], receipt["subject"], receipt["jti"])
	}

	if r := e.Call(t, "GET", "/api/flows/"+id+"/consent-record", webtest.TokB, ""); r.Status != http.StatusNotFound {
		t.Fatalf("another organization's flow: %d %s", r.Status, r.Body)
	}
	if r := e.Call(t, "GET", "/api/flows/"+id+"/consent-record", "", ""); r.Status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", r.Status)
	}

	if r := e.Call(t, "POST", "/api/flows/"+id+"/withdraw", webtest.TokA, `{"reason":"Asked by phone."}`); r.Status != http.StatusOK {
		t.Fatalf("withdraw: %d %s", r.Status, r.Body)
	}
	withdrawn := recordOf("withdrawn")
	if withdrawn["consent_status"] != "ConsentRevoked" || len(withdrawn["receipt_ids"].([]any)) != 2 ||
		!strings.HasSuffix(states(withdrawn), "ConsentGiven ConsentRevoked") {
		t.Fatalf("withdrawn by the organization: %s, events %s", withdrawn["consent_status"], states(withdrawn))
	}

	if r := e.Call(t, "POST", "/api/erasures", webtest.TokA, `{"nationalId":"ID-12345"}`); r.Status != http.StatusCreated {
		t.Fatalf("erase: %d %s", r.Status, r.Body)
	}
	erased := recordOf("erased")
	for _, gone := range []string{"notice", "language", "parameters", "purposes", "collection_method", "valid_until"} {
		if _, ok := erased[gone]; ok {
			t.Errorf("the erased record keeps %s: %v", gone, erased)
		}
	}
	if erased["pii_principal_id"] != nil || erased["consent_status"] != "ConsentUnknown" || states(erased) != "ConsentUnknown" ||
		len(erased["receipt_ids"].([]any)) != 2 {
		t.Fatalf("erased: %v", erased)
	}
	if r := e.Call(t, "GET", "/api/flows/00000000-0000-7000-8000-000000000000/consent-record", webtest.TokA, ""); r.Status != http.StatusNotFound {
		t.Fatalf("a flow never made: %d %s", r.Status, r.Body)
	}
}
