package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestAReceiptNamesTheOrganizationAndTheRecipient: a definition whose
// recipient is another party (a credit bureau) makes receipts that name the
// organization that asked by its registered name, and the recipient in a
// claim of its own; receipts signed before the recipient had its own claim
// still verify, as they were signed.
func TestAReceiptNamesTheOrganizationAndTheRecipient(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	if r := e.Call(t, "POST", "/api/flow-definitions", webtest.TokA, draftBody(map[string]any{"id": "credit-check", "recipient": "Kredittbyrået AS"})); r.Status != http.StatusCreated {
		t.Fatalf("publish: %d %s", r.Status, r.Body)
	}
	id := e.Create(t, webtest.TokA, map[string]any{"flowDefinitionId": "credit-check"})
	e.decideWithEvidence(t, id, true)
	signed := e.attachments(t, id)[0]
	claims := e.receiptClaims(t, signed)
	if claims["organizationId"] != webtest.OrgA || claims["organizationName"] != "Test Bank" || claims["recipient"] != "Kredittbyrået AS" {
		t.Fatalf("the receipt names organization %v (%v) and recipient %v, want Test Bank (%s) and Kredittbyrået AS",
			claims["organizationName"], claims["organizationId"], claims["recipient"], webtest.OrgA)
	}
	verify := func(jws string) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"receipt": jws})
		got := e.Call(t, "POST", "/api/receipts/verify", "", string(b)).JSON(t)
		if got["valid"] != true {
			t.Fatalf("verify: %v", got)
		}
		return got["receipt"].(map[string]any)
	}
	if r := verify(signed); r["organizationName"] != "Test Bank" || r["recipient"] != "Kredittbyrået AS" {
		t.Fatalf("POST /api/receipts/verify says %v", r)
	}

	// A receipt as flowd signed them before: the recipient in
	// organizationName, no recipient claim.
	old := map[string]any{}
	for k, v := range claims {
		old[k] = v
	}
	delete(old, "recipient")
	old["organizationName"], old["jti"] = "Kredittbyrået AS", uuid.NewString()
	raw, _ := json.Marshal(old)
	var oldJWS string
	ctx := context.Background()
	if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) (err error) {
		oldJWS, err = e.ReceiptKeys.SignReceiptTx(ctx, tx, receipts.Type, raw)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r := verify(oldJWS); r["organizationName"] != "Kredittbyrået AS" || r["recipient"] != nil || r["jti"] != old["jti"] {
		t.Fatalf("an earlier receipt is shown as %v, want its claims as signed", r)
	}
}
