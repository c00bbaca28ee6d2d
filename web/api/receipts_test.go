package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	// jwx is a JOSE library flowd does not sign with: receipts must verify
	// with any standard library, not only with the one that made them.
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/web/internal/webtest"
)

// decideWithEvidence decides an organization A flow through the consent
// journey, as its person would on the flow's link: proven at the
// substantial level (or the level the flow's definition asks for, when
// higher), the text shown in Norwegian.
func (e *apiEnv) decideWithEvidence(t *testing.T, id string, accept bool) {
	t.Helper()
	ctx := context.Background()
	f, err := e.Flows.Get(ctx, flows.Caller{OrganizationID: webtest.OrgA}, id)
	if err != nil {
		t.Fatal(err)
	}
	token, ok := strings.CutPrefix(f.ConsentURL, "https://flowd.example/consent/")
	if !ok {
		t.Fatalf("consent link %q", f.ConsentURL)
	}
	proof := consent.Proof{NationalID: f.NationalID, ACR: assurance.DefaultACRMap[assurance.Substantial]}
	answer := consent.Answer{Accept: accept, Language: "nb"}
	_, err = e.Journey.Decide(ctx, token, proof, answer)
	if weak := (*consent.AssuranceError)(nil); errors.As(err, &weak) {
		proof.ACR = weak.ACR
		_, err = e.Journey.Decide(ctx, token, proof, answer)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// validFor90Days publishes organization A's definition "loan", which lasts
// 90 days and asks for the substantial level, for flows whose acceptance
// must have a validUntil.
func (e *apiEnv) validFor90Days(t *testing.T) string {
	t.Helper()
	body := draftBody(map[string]any{"id": "loan", "validity": "P90D", "assuranceLevel": "substantial"})
	if r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, body); r.Status != http.StatusCreated {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	return "loan"
}

// receiptClaims verifies jwsText with jwx against the JWKS flowd publishes
// and returns its claims.
func (e *apiEnv) receiptClaims(t *testing.T, jwsText string) map[string]any {
	t.Helper()
	raw, err := e.ReceiptKeys.JWKS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	set, err := jwk.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := jws.Verify([]byte(jwsText), jws.WithKeySet(set, jws.WithRequireKid(true)))
	if err != nil {
		t.Fatalf("jwx refuses the receipt: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// attachments returns the flow's receipts as the API lists and serves them.
func (e *apiEnv) attachments(t *testing.T, id string) []string {
	t.Helper()
	r := e.Call(t, "GET", "/api/flows/"+id+"/attachments", webtest.TokARead, "")
	if r.Status != http.StatusOK {
		t.Fatalf("attachments: %d %s", r.Status, r.Body)
	}
	var list struct {
		Data []struct{ ID, Kind, Href string }
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range list.Data {
		got := e.Call(t, "GET", a.Href, webtest.TokARead, "")
		if got.Status != http.StatusOK || got.Header.Get("Content-Type") != "application/jwt" || a.Kind != "consent-receipt" {
			t.Fatalf("attachment %s: %d %s %s", a.ID, got.Status, got.Header.Get("Content-Type"), got.Body)
		}
		out = append(out, string(got.Body))
	}
	return out
}

func TestEveryDecisionAndWithdrawalHasAReceipt(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	accepted := e.Create(t, webtest.TokA, map[string]any{"nationalId": "12345678901", "flowDefinitionId": e.validFor90Days(t)})
	rejected := e.Create(t, webtest.TokA, nil)
	if got := e.attachments(t, accepted); len(got) != 0 {
		t.Fatalf("an open flow has receipts: %v", got)
	}
	e.decideWithEvidence(t, accepted, true)
	e.decideWithEvidence(t, rejected, false)

	flow := e.Call(t, "GET", "/api/flows/"+accepted, webtest.TokA, "").JSON(t)["flow"].(map[string]any)
	receipts := e.attachments(t, accepted)
	if flow["numAttachments"] != 1.0 || len(receipts) != 1 {
		t.Fatalf("after the acceptance: numAttachments %v, receipts %d", flow["numAttachments"], len(receipts))
	}
	first := e.receiptClaims(t, receipts[0])
	consent := flow["consent"].(map[string]any)
	def := first["definition"].(map[string]any)
	for name, c := range map[string]struct{ got, want any }{
		"iss":            {first["iss"], "https://flowd.example"},
		"flowId":         {first["flowId"], accepted},
		"referenceId":    {first["referenceId"], flow["referenceId"]},
		"organizationId": {first["organizationId"], webtest.OrgA},
		"decision":       {first["decision"], "accepted"},
		"definition.id":  {def["id"], flow["flowDefinitionId"]},
		"textSha256":     {def["textSha256"], consent["textSha256"]},
		"language":       {def["language"], "nb"},
		"validUntil":     {first["validUntil"] != nil, true},
		"assurance":      {first["assurance"].(map[string]any)["level"], "substantial"},
	} {
		if c.got != c.want {
			t.Errorf("receipt %s = %v, want %v", name, c.got, c.want)
		}
	}
	if s, _ := first["subject"].(string); len(s) < 40 || strings.Contains(receipts[0], "12345678901") {
		t.Errorf("subject %q: want a hash, and the national id nowhere", s)
	}
	if r := e.attachments(t, rejected); len(r) != 1 || e.receiptClaims(t, r[0])["decision"] != "rejected" || e.receiptClaims(t, r[0])["validUntil"] != nil {
		t.Fatalf("the rejection's receipt: %v", r)
	}

	// The organization withdraws: a second receipt points at the first.
	if r := e.Call(t, "POST", "/api/flows/"+accepted+"/withdraw", webtest.TokA, `{"reason":"Asked by phone."}`); r.Status != http.StatusOK {
		t.Fatalf("withdraw: %d %s", r.Status, r.Body)
	}
	receipts = e.attachments(t, accepted)
	if len(receipts) != 2 {
		t.Fatalf("after the withdrawal: %d receipts", len(receipts))
	}
	second := e.receiptClaims(t, receipts[1])
	if second["decision"] != "withdrawn" || second["previous"] != first["jti"] || second["withdrawnBy"] != "organization" ||
		second["subject"] != first["subject"] {
		t.Fatalf("the withdrawal's receipt: %v", second)
	}
	if n := e.Call(t, "GET", "/api/flows/"+accepted, webtest.TokA, "").JSON(t)["flow"].(map[string]any)["numAttachments"]; n != 2.0 {
		t.Fatalf("numAttachments after the withdrawal: %v", n)
	}

	// Another organization sees none of it.
	for _, path := range []string{"/api/flows/" + accepted + "/attachments", "/api/flows/" + accepted + "/attachments/" + first["jti"].(string)} {
		if r := e.Call(t, "GET", path, webtest.TokB, ""); r.Status != http.StatusNotFound {
			t.Errorf("%s as another organization: %d", path, r.Status)
		}
	}

	// Deleting the flow deletes its receipts; the log keeps their ids.
	if r := e.Call(t, "DELETE", "/api/flows/"+accepted, webtest.TokA, ""); r.Status != http.StatusOK {
		t.Fatalf("delete: %d", r.Status)
	}
	if n := e.Count(t, `select count(*) from flow_attachments where flow_id = $1`, accepted); n != 0 {
		t.Fatalf("%d receipts survived the delete", n)
	}
	log, _, err := e.Flows.Deletions(context.Background(), webtest.OrgA, 10, "")
	if err != nil || len(log) != 1 || len(log[0].ReceiptIDs) != 2 || log[0].ReceiptIDs[0] != first["jti"] && log[0].ReceiptIDs[1] != first["jti"] {
		t.Fatalf("deletion log: %+v %v", log, err)
	}
}

func TestReceiptVerificationAndSubjectCheck(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	id := e.Create(t, webtest.TokA, map[string]any{"nationalId": "12345678901"})
	e.decideWithEvidence(t, id, true)
	receipt := e.attachments(t, id)[0]
	body := func(kv map[string]string) string { b, _ := json.Marshal(kv); return string(b) }

	ok := e.Call(t, "POST", "/api/receipts/verify", "", body(map[string]string{"receipt": receipt})).JSON(t)
	if ok["valid"] != true || ok["receipt"].(map[string]any)["flowId"] != id || !strings.HasPrefix(ok["keyId"].(string), "receipt-") {
		t.Fatalf("a genuine receipt: %v", ok)
	}
	parts := strings.Split(receipt, ".")
	forged := parts[0] + "." + strings.TrimRight(parts[1], "A") + "B." + parts[2]
	for name, r := range map[string]string{"tampered": forged, "not a JWS": "hello", "signature cut": parts[0] + "." + parts[1] + "."} {
		got := e.Call(t, "POST", "/api/receipts/verify", "", body(map[string]string{"receipt": r}))
		if m := got.JSON(t); got.Status != http.StatusOK || m["valid"] != false || m["reason"] == nil || m["receipt"] != nil {
			t.Errorf("%s: %d %v", name, got.Status, m)
		}
	}
	if r := e.Call(t, "POST", "/api/receipts/verify", "", `{"receipt":""}`); r.Status != http.StatusBadRequest || r.Fields(t)[0] != "receipt" {
		t.Errorf("an empty receipt: %d %s", r.Status, r.Body)
	}

	for _, c := range []struct {
		name, token, nationalID string
		status                  int
		matches                 bool
	}{
		{"the person", webtest.TokARead, "12345678901", 200, true},
		{"written otherwise", webtest.TokARead, "123456-78901", 200, true},
		{"someone else", webtest.TokARead, "10987654321", 200, false},
		{"another organization", webtest.TokB, "12345678901", 400, false},
		{"no token", "", "12345678901", 401, false},
	} {
		r := e.Call(t, "POST", "/api/receipts/subject", c.token, body(map[string]string{"receipt": receipt, "nationalId": c.nationalID}))
		if r.Status != c.status || (c.status == 200 && r.JSON(t)["matches"] != c.matches) {
			t.Errorf("%s: %d %s", c.name, r.Status, r.Body)
		}
	}
	if r := e.Call(t, "POST", "/api/receipts/subject", webtest.TokA, body(map[string]string{"receipt": forged, "nationalId": "12345678901"})); r.Status != 400 {
		t.Errorf("a tampered receipt's subject: %d %s", r.Status, r.Body)
	}
}
