package erasure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/database"
)

// Receipt is what an erasure receipt states, the claims of the JWS flowd
// signs with its receipt key (the consent receipts' key, published at
// /oauth/jwks). It names the person only by Subject, as the organization's
// consent receipts do.
type Receipt struct {
	Issuer           string  `json:"iss"`
	ID               string  `json:"jti"`
	IssuedAt         int64   `json:"iat"`
	ErasureID        string  `json:"erasureId"`
	OrganizationID   string  `json:"organizationId"`
	OrganizationName string  `json:"organizationName"`
	ErasedAt         string  `json:"erasedAt"` // RFC 3339
	Subject          string  `json:"subject"`
	FlowCount        int     `json:"flowCount"`
	ReceiptsKept     bool    `json:"receiptsKept"`
	KeyDestroyedAt   *string `json:"keyDestroyedAt"` // RFC 3339; null when the person had no key of their own
	// Retained says in words what flowd keeps of the person, and why.
	Retained string `json:"retained"`
}

// The statements of Receipt.Retained.
const (
	retainedWithReceipts = "The consent receipts of the erased flows are kept as evidence for the establishment, " +
		"exercise or defence of legal claims (GDPR Art. 17(3)(e)). They name the person only by the subject above, " +
		"a keyed hash that cannot be linked to anyone without their national id. Nothing else of the person is kept " +
		"but this receipt and the deletion log's entries (flow ids and references)."
	retainedNothing = "Nothing of the person is kept but this receipt, naming them by the subject above, and the " +
		"deletion log's entries (flow ids and references)."
)

// ReceiptType is the JOSE typ header of an erasure receipt (RFC 8725
// 3.11): a consent receipt, signed with the same key, has another, so that
// neither can be taken for the other.
const ReceiptType = "erasure-receipt+jwt"

// ReceiptSigner signs erasure receipts with the receipt key, under the typ
// given, and gives the keys that verify them: the identity module.
type ReceiptSigner interface {
	SignReceiptTx(ctx context.Context, tx database.Tx, typ string, claims []byte) (string, error)
	ReceiptKeys(ctx context.Context) (jose.JSONWebKeySet, error)
}

// ErrReceiptInvalid is what VerifyReceipt returns for anything that is not
// an erasure receipt flowd signed; the wrapped reason is for people.
var ErrReceiptInvalid = errors.New("not a valid erasure receipt")

// InvalidReceiptError is an ErrReceiptInvalid with its reason.
type InvalidReceiptError struct{ Reason string }

func (e *InvalidReceiptError) Error() string { return ErrReceiptInvalid.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrReceiptInvalid) hold.
func (e *InvalidReceiptError) Is(target error) bool { return target == ErrReceiptInvalid }

func invalidReceipt(format string, args ...any) error {
	return &InvalidReceiptError{Reason: fmt.Sprintf(format, args...)}
}

// maxReceipt bounds what VerifyReceipt reads.
const maxReceipt = 16 << 10

// IsReceipt reports whether jws claims to be an erasure receipt, without
// checking its signature: whether to check it as one rather than as a
// consent receipt, which is signed with the same key. It is one when its
// typ says so, or when its claims are an erasure's whatever its typ says:
// an erasure receipt signed before erasure receipts had a type of their
// own is then refused by VerifyReceipt for its type, not taken for a
// consent receipt.
func IsReceipt(jws string) bool {
	jws = strings.TrimSpace(jws)
	if len(jws) > maxReceipt {
		return false
	}
	sig, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(sig.Signatures) != 1 {
		return false
	}
	if typ, _ := sig.Signatures[0].Header.ExtraHeaders[jose.HeaderType].(string); typ == ReceiptType {
		return true
	}
	var claims struct {
		ErasureID *string `json:"erasureId"`
	}
	return json.Unmarshal(sig.UnsafePayloadWithoutVerification(), &claims) == nil && claims.ErasureID != nil
}

// VerifiedReceipt is an erasure receipt whose signature checked out.
type VerifiedReceipt struct {
	Receipt Receipt
	KeyID   string
}

// VerifyReceipt checks that jws is an erasure receipt, by its typ and its
// claims, signed by one of keys and, unless issuer is empty, issued by
// issuer.
func VerifyReceipt(jws string, keys jose.JSONWebKeySet, issuer string) (VerifiedReceipt, error) {
	jws = strings.TrimSpace(jws)
	if jws == "" || len(jws) > maxReceipt {
		return VerifiedReceipt{}, invalidReceipt("it is empty or longer than any receipt")
	}
	sig, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(sig.Signatures) != 1 {
		return VerifiedReceipt{}, invalidReceipt("it is not a compact JWS signed with ES256")
	}
	if typ, _ := sig.Signatures[0].Header.ExtraHeaders[jose.HeaderType].(string); typ != ReceiptType {
		return VerifiedReceipt{}, invalidReceipt("its typ is %q, not %q", typ, ReceiptType)
	}
	kid := sig.Signatures[0].Header.KeyID
	found := keys.Key(kid)
	if len(found) == 0 {
		return VerifiedReceipt{}, invalidReceipt("it is signed with key %q, which is not one of flowd's receipt keys", kid)
	}
	payload, err := sig.Verify(found[0])
	if err != nil {
		return VerifiedReceipt{}, invalidReceipt("its signature does not match its content: it was changed after signing")
	}
	var r Receipt
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || r.ErasureID == "" {
		return VerifiedReceipt{}, invalidReceipt("its claims are not those of an erasure receipt")
	}
	if issuer != "" && r.Issuer != issuer {
		return VerifiedReceipt{}, invalidReceipt("it was issued by %q, not %q", r.Issuer, issuer)
	}
	return VerifiedReceipt{Receipt: r, KeyID: kid}, nil
}

// signReceiptTx signs e's receipt in tx.
func (m *Module) signReceiptTx(ctx context.Context, tx database.Tx, e Erasure) (string, error) {
	name, err := m.orgs.OrganizationName(ctx, e.OrganizationID)
	if err != nil {
		return "", fmt.Errorf("erasure: the organization of a receipt: %w", err)
	}
	r := Receipt{Issuer: m.issuer, ID: e.ID, IssuedAt: e.ErasedAt.Unix(), ErasureID: e.ID,
		OrganizationID: e.OrganizationID, OrganizationName: name, ErasedAt: e.ErasedAt.UTC().Format(time.RFC3339),
		Subject: e.Subject, FlowCount: e.FlowCount, ReceiptsKept: e.KeepReceipts,
		Retained: retainedNothing}
	if e.KeyDestroyedAt != nil {
		at := e.KeyDestroyedAt.UTC().Format(time.RFC3339)
		r.KeyDestroyedAt = &at
	}
	if e.KeepReceipts {
		r.Retained = retainedWithReceipts
	}
	claims, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	return m.signer.SignReceiptTx(ctx, tx, ReceiptType, claims)
}

// Verify checks that jws is an erasure receipt of this flowd, against the
// receipt keys it publishes.
func (m *Module) Verify(ctx context.Context, jws string) (VerifiedReceipt, error) {
	keys, err := m.signer.ReceiptKeys(ctx)
	if err != nil {
		return VerifiedReceipt{}, err
	}
	return VerifyReceipt(jws, keys, m.issuer)
}
