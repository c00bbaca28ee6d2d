package erasure_test

import (
	"encoding/json"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/testkit/testkeys"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
)

// TestTheReceiptVerifiersCheckTheirTyp: the erasure receipt's verifier,
// which the CLI uses offline too, takes an erasure receipt only under the
// typ erasure-receipt+jwt, and the consent receipt's verifier refuses that
// typ, whatever the claims.
func TestTheReceiptVerifiersCheckTheirTyp(t *testing.T) {
	t.Parallel()
	key := testkeys.EC(t)
	var keys jose.JSONWebKeySet
	if err := json.Unmarshal(testkeys.PublicJWKS(t, "receipt-1", key), &keys); err != nil {
		t.Fatal(err)
	}
	claims, _ := json.Marshal(erasure.Receipt{Issuer: "https://flowd.example", ID: "e-1", ErasureID: "e-1",
		OrganizationID: "org-a", Subject: "s", Retained: "nothing"})
	sign := func(typ string) string {
		t.Helper()
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "receipt-1"}},
			(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
		if err != nil {
			t.Fatal(err)
		}
		jws, err := signer.Sign(claims)
		if err != nil {
			t.Fatal(err)
		}
		out, err := jws.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	typed, mistyped := sign(erasure.ReceiptType), sign(receipts.Type)
	if v, err := erasure.VerifyReceipt(typed, keys, "https://flowd.example"); err != nil || v.Receipt.ErasureID != "e-1" {
		t.Fatalf("an erasure receipt typed %s: %+v %v", erasure.ReceiptType, v, err)
	}
	if !erasure.IsReceipt(typed) || !erasure.IsReceipt(mistyped) {
		t.Error("IsReceipt does not send an erasure's claims to the erasure verifier")
	}
	if _, err := erasure.VerifyReceipt(mistyped, keys, ""); err == nil || !strings.Contains(err.Error(), `its typ is "consent-receipt+jwt"`) {
		t.Errorf("an erasure receipt typed %s: %v", receipts.Type, err)
	}
	if _, err := receipts.Verify(typed, keys, ""); err == nil || !strings.Contains(err.Error(), `its typ is "erasure-receipt+jwt"`) {
		t.Errorf("the consent receipts' verifier on an erasure receipt: %v", err)
	}
}
