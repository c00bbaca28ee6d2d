package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/web/internal/webtest"
)

// headerType is the typ of a compact JWS's protected header.
func headerType(t *testing.T, jwsText string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(jwsText, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Typ string }
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return h.Typ
}

// TestReceiptsCannotBeTakenForEachOther: an erasure receipt's JOSE typ is
// erasure-receipt+jwt, a consent receipt's consent-receipt+jwt, and flowd's
// verifiers check it: claims of one kind signed with flowd's receipt key
// under the other's typ are refused, as an erasure receipt is wherever a
// consent receipt is expected. POST /api/receipts/subject tells the
// organization whom an erasure receipt concerns too, and only it.
func TestReceiptsCannotBeTakenForEachOther(t *testing.T) {
	t.Parallel()
	e := newAPI(t)
	person := "ID-40404"
	accepted := e.Create(t, webtest.TokA, map[string]any{"nationalId": person})
	e.decideWithEvidence(t, accepted, true)
	consentReceipt := e.attachments(t, accepted)[0]
	r := e.Call(t, "POST", "/api/erasures", webtest.TokA, `{"nationalId":"`+person+`"}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("erase: %d %s", r.Status, r.Body)
	}
	erasureReceipt, _ := r.JSON(t)["receipt"].(string)
	if typ := headerType(t, erasureReceipt); typ != "erasure-receipt+jwt" {
		t.Errorf("the erasure receipt's typ is %q", typ)
	}
	if typ := headerType(t, consentReceipt); typ != "consent-receipt+jwt" {
		t.Errorf("the consent receipt's typ is %q", typ)
	}

	// Each kind's claims, signed with the receipt key under the other's typ.
	sign := func(typ string, claims map[string]any) string {
		t.Helper()
		raw, _ := json.Marshal(claims)
		var out string
		ctx := context.Background()
		if err := database.WithTx(ctx, e.Pool, func(tx database.Tx) (err error) {
			out, err = e.ReceiptKeys.SignReceiptTx(ctx, tx, typ, raw)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	erasureAsConsent := sign(receipts.Type, e.receiptClaims(t, erasureReceipt))
	consentAsErasure := sign(erasure.ReceiptType, e.receiptClaims(t, consentReceipt))
	for name, jws := range map[string]string{"erasure claims typed as a consent receipt": erasureAsConsent,
		"consent claims typed as an erasure receipt": consentAsErasure} {
		got := e.Call(t, "POST", "/api/receipts/verify", "", `{"receipt":"`+jws+`"}`).JSON(t)
		if reason, _ := got["reason"].(string); got["valid"] != false || !strings.Contains(reason, "typ") &&
			!strings.Contains(reason, "claims") {
			t.Errorf("POST /api/receipts/verify of %s: %v", name, got)
		}
		check := e.Call(t, "POST", "/api/receipts/subject", webtest.TokA, `{"receipt":"`+jws+`","nationalId":"`+person+`"}`)
		if check.Status != http.StatusBadRequest || !strings.Contains(string(check.Body), "receipt") {
			t.Errorf("POST /api/receipts/subject of %s: %d %s", name, check.Status, check.Body)
		}
	}
	if _, err := e.Receipts.Verify(context.Background(), erasureReceipt); err == nil {
		t.Error("the consent receipts' verifier accepts an erasure receipt")
	}

	// Whom the erasure receipt concerns: the person, to their organization.
	for _, c := range []struct {
		token, nationalID string
		status            int
		matches           any
	}{
		{webtest.TokA, person, http.StatusOK, true},
		{webtest.TokA, "ID-40405", http.StatusOK, false},
		{webtest.TokB, person, http.StatusBadRequest, nil},
	} {
		got := e.Call(t, "POST", "/api/receipts/subject", c.token, `{"receipt":"`+erasureReceipt+`","nationalId":"`+c.nationalID+`"}`)
		if got.Status != c.status || c.status == http.StatusOK && got.JSON(t)["matches"] != c.matches {
			t.Errorf("POST /api/receipts/subject of the erasure receipt for %s with %s: %d %s, want %d matches %v",
				c.nationalID, c.token, got.Status, got.Body, c.status, c.matches)
		}
	}
}
