package api_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/flowd/flowd/web/internal/webtest"
)

// TestErasingAPerson erases a person from organization A over HTTP: their
// flows there go as deletions do, the other person's and organization
// B's flows of the same person stay, the erasure receipt verifies with an
// independent JOSE library and on POST /api/receipts/verify, the kept
// consent receipts are readable on the erasure, and asking again answers
// the same erasure. Every answer is checked against the OpenAPI document.
func TestErasingAPerson(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	person, other := "ID-12345", "ID-99999"
	accepted := e.Create(t, webtest.TokA, map[string]any{"nationalId": person})
	e.decideWithEvidence(t, accepted, true)
	open := e.Create(t, webtest.TokA, map[string]any{"nationalId": person})
	othersFlow := e.Create(t, webtest.TokA, map[string]any{"nationalId": other})
	inB := e.Create(t, webtest.TokB, map[string]any{"nationalId": person, "redirectUrl": "https://beta.example/done"})
	consentReceipt := e.attachments(t, accepted)[0]

	for _, c := range []struct {
		name, token, body string
		status            int
	}{
		{"without erasures:write", webtest.TokARead, `{"nationalId":"ID-12345"}`, http.StatusForbidden},
		{"no national id", webtest.TokA, `{}`, http.StatusBadRequest},
		{"a national id of the wrong form", webtest.TokA, `{"nationalId":"ID 12345!"}`, http.StatusBadRequest},
		{"an unknown field", webtest.TokA, `{"nationalId":"ID-12345","keep":true}`, http.StatusBadRequest},
	} {
		if r := e.Call(t, "POST", "/api/erasures", c.token, c.body); r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.status)
		}
	}
	if n := e.Count(t, `select count(*) from erasures`); n != 0 {
		t.Fatalf("refused requests left %d erasures", n)
	}

	first := e.Call(t, "POST", "/api/erasures", webtest.TokA, `{"nationalId":"ID-12345","keepReceipts":true}`, "Idempotency-Key", "erase-1")
	if first.Status != http.StatusCreated {
		t.Fatalf("erase: %d %s", first.Status, first.Body)
	}
	var got struct {
		ID, Subject, Receipt string
		FlowCount            int
		KeepReceipts         bool
		KeptReceipts         []struct{ ID, FlowID, Receipt string }
	}
	if err := json.Unmarshal(first.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.FlowCount != 2 || !got.KeepReceipts || first.Header.Get("Location") != "/api/erasures/"+got.ID {
		t.Fatalf("the erasure: %s (Location %q)", first.Body, first.Header.Get("Location"))
	}
	if strings.Contains(string(first.Body), person) {
		t.Fatalf("the erasure names the person: %s", first.Body)
	}

	// Gone from A, as deletions: logged, each with its flow.deleted.
	for _, id := range []string{accepted, open} {
		if r := e.Call(t, "GET", "/api/flows/"+id, webtest.TokA, ""); r.Status != http.StatusNotFound {
			t.Errorf("erased flow %s: %d", id, r.Status)
		}
		if n := e.Count(t, `select count(*) from flow_deletions where flow_id = $1 and deleted_by = 'client:client-a'`, id); n != 1 {
			t.Errorf("erased flow %s has %d deletion log entries", id, n)
		}
		if n := e.Count(t, `select count(*) from test_events where kind = 'flow.deleted' and flow_id = $1`, id); n != 1 {
			t.Errorf("erased flow %s sent %d flow.deleted", id, n)
		}
	}
	// The other person's flow and the person's flow in B stay.
	if r := e.Call(t, "GET", "/api/flows/"+othersFlow, webtest.TokA, ""); r.Status != http.StatusOK {
		t.Errorf("another person's flow: %d", r.Status)
	}
	if r := e.Call(t, "GET", "/api/flows/"+inB, webtest.TokB, ""); r.Status != http.StatusOK {
		t.Errorf("the person's flow in organization B: %d", r.Status)
	}
	if n := e.Count(t, `select count(*) from events where organization_id = $1 and type = 'subject.erased' and body like '%' || $2 || '%'
		and body not like '%' || $3 || '%'`, webtest.OrgA, got.ID, person); n != 1 {
		t.Errorf("%d subject.erased events naming the erasure and not the person, want 1", n)
	}
	if n := e.Count(t, `select count(*) from test_events where kind = 'audit' and status = 'subject.erase' and reference_id = $1`, got.ID); n != 1 {
		t.Errorf("%d audit entries of the erasure, want 1", n)
	}

	// The receipt, checked by jwx against the published keys.
	claims := e.receiptClaims(t, got.Receipt)
	consentClaims := e.receiptClaims(t, consentReceipt)
	if claims["erasureId"] != got.ID || claims["organizationId"] != webtest.OrgA || claims["organizationName"] != "Test Bank" ||
		claims["flowCount"] != float64(2) || claims["receiptsKept"] != true || claims["subject"] != consentClaims["subject"] ||
		claims["keyDestroyedAt"] == "" || !strings.Contains(claims["retained"].(string), "17(3)(e)") {
		t.Fatalf("the erasure receipt's claims: %v (the consent receipt's subject %v)", claims, consentClaims["subject"])
	}
	verified := e.Call(t, "POST", "/api/receipts/verify", "", `{"receipt":"`+got.Receipt+`"}`).JSON(t)
	if erasureReceipt, _ := verified["erasureReceipt"].(map[string]any); verified["valid"] != true || erasureReceipt["erasureId"] != got.ID {
		t.Fatalf("POST /api/receipts/verify: %v", verified)
	}
	if tampered := e.Call(t, "POST", "/api/receipts/verify", "", `{"receipt":"`+tamperClaims(t, got.Receipt)+`"}`).JSON(t); tampered["valid"] != false {
		t.Fatalf("a changed erasure receipt: %v", tampered)
	}

	// The kept consent receipt is readable on the erasure, to A alone.
	one := e.Call(t, "GET", "/api/erasures/"+got.ID, webtest.TokA, "")
	if !strings.Contains(string(one.Body), consentReceipt) || !strings.Contains(string(one.Body), accepted) {
		t.Fatalf("the erasure does not list the kept receipt: %d %s", one.Status, one.Body)
	}
	if r := e.Call(t, "GET", "/api/erasures/"+got.ID, webtest.TokB, ""); r.Status != http.StatusNotFound {
		t.Errorf("another organization reads the erasure: %d", r.Status)
	}
	if r := e.Call(t, "GET", "/api/erasures", webtest.TokA, ""); !strings.Contains(string(r.Body), got.ID) {
		t.Errorf("the list: %d %s", r.Status, r.Body)
	}

	// The same key replays; asking again answers the same erasure.
	replay := e.Call(t, "POST", "/api/erasures", webtest.TokA, `{"nationalId":"ID-12345","keepReceipts":true}`, "Idempotency-Key", "erase-1")
	if replay.Status != http.StatusCreated || replay.Header.Get("Idempotent-Replayed") != "true" || string(replay.Body) != string(first.Body) {
		t.Fatalf("the replay: %d %s", replay.Status, replay.Body)
	}
	again := e.Call(t, "POST", "/api/erasures", webtest.TokA, `{"nationalId":"ID-12345"}`)
	if again.Status != http.StatusOK || again.JSON(t)["id"] != got.ID {
		t.Fatalf("asked again: %d %s", again.Status, again.Body)
	}
	if n := e.Count(t, `select count(*) from erasures`); n != 1 {
		t.Fatalf("%d erasures, want 1", n)
	}
	// A person A never held: an erasure of no flows, as evidence of the request.
	if r := e.Call(t, "POST", "/api/erasures", webtest.TokA, `{"nationalId":"ID-00000"}`); r.Status != http.StatusCreated || r.JSON(t)["flowCount"] != float64(0) {
		t.Fatalf("a person never held: %d %s", r.Status, r.Body)
	}
}

// tamperClaims changes one claim of a compact JWS, keeping its signature.
func tamperClaims(t *testing.T, jwsText string) string {
	t.Helper()
	parts := strings.Split(jwsText, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(payload), `"flowCount":2`, `"flowCount":0`, 1)
	if changed == string(payload) {
		t.Fatalf("nothing to change in %s", payload)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(changed))
	return strings.Join(parts, ".")
}
