package consent

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/flows/nationalid"
)

// Receipt is what a consent receipt states: the claims of the JWS flowd
// signs for every decision and withdrawal, shaped after the Kantara Consent
// Receipt and ISO/IEC 27560. It names the person only by Subject, a keyed
// hash of their national id that only flowd can compute.
type Receipt struct {
	Issuer         string `json:"iss"`
	ID             string `json:"jti"`
	IssuedAt       int64  `json:"iat"`
	FlowID         string `json:"flowId"`
	ReferenceID    string `json:"referenceId"`
	OrganizationID string `json:"organizationId"`
	// OrganizationName is the organization's registered name when the
	// receipt was signed: who asked for the consent.
	OrganizationName string `json:"organizationName"`
	// Recipient is who receives the data, as the consent text names it.
	// Receipts signed before it was a claim of its own lack it, and their
	// OrganizationName is the recipient instead (see Parties).
	Recipient  string            `json:"recipient,omitempty"`
	Definition ReceiptDefinition `json:"definition"`
	Decision   string            `json:"decision"` // accepted, rejected or withdrawn
	// ValidUntil is when an acceptance with a validity ends (RFC 3339).
	ValidUntil string `json:"validUntil,omitempty"`
	// Assurance is null when the deployment turned the eID proof off.
	Assurance *ReceiptAssurance `json:"assurance"`
	Subject   string            `json:"subject"`
	// Previous is the jti of the receipt a withdrawal supersedes.
	Previous string `json:"previous,omitempty"`
	// WithdrawnBy says who withdrew: "individual" or "organization".
	WithdrawnBy string `json:"withdrawnBy,omitempty"`
}

// ReceiptDefinition names the text consented to: the definition version and
// the SHA-256 of its canonical text, and the language it was shown in.
type ReceiptDefinition struct {
	ID         string `json:"id"`
	Version    int    `json:"version"`
	TextSHA256 string `json:"textSha256"`
	Language   string `json:"language"`
}

// ReceiptAssurance is how sure the eID was of the person.
type ReceiptAssurance struct {
	Level string `json:"level"`
	ACR   string `json:"acr"`
}

// IssuedAtTime is when the receipt was signed: the decision or withdrawal.
func (r Receipt) IssuedAtTime() time.Time { return time.Unix(r.IssuedAt, 0).UTC() }

// Parties returns who asked for the consent and who receives the data, as
// the receipt names them. A receipt signed before the recipient had a claim
// of its own named only the recipient, in organizationName: its
// organization is then "".
func (r Receipt) Parties() (organization, recipient string) {
	if r.Recipient == "" {
		return "", r.OrganizationName
	}
	return r.OrganizationName, r.Recipient
}

// ReceiptSigner signs receipts and gives the keys that verify them: the
// identity module, whose JWKS publishes those keys.
type ReceiptSigner interface {
	// SignReceiptTx signs claims as a compact JWS with the receipt key that
	// signs now, reading it through tx if it must.
	SignReceiptTx(ctx context.Context, tx database.Tx, claims []byte) (string, error)
	// ReceiptKeys returns the public keys of every receipt that may still be
	// checked.
	ReceiptKeys(ctx context.Context) (jose.JSONWebKeySet, error)
}

// ReceiptType is the typ header of every receipt.
const ReceiptType = "consent-receipt+jwt"

// maxReceipt bounds what Verify reads: a receipt is about a kilobyte.
const maxReceipt = 16 << 10

// ErrReceiptInvalid is what VerifyReceipt returns for anything that is not
// a receipt flowd signed; the wrapping error says why, for people.
var ErrReceiptInvalid = errors.New("not a valid consent receipt")

// InvalidReceiptError is an ErrReceiptInvalid with its reason.
type InvalidReceiptError struct {
	Reason string
	// UnknownKey is set when no key of the set has the receipt's kid.
	UnknownKey bool
}

func (e *InvalidReceiptError) Error() string { return ErrReceiptInvalid.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrReceiptInvalid) hold.
func (e *InvalidReceiptError) Is(target error) bool { return target == ErrReceiptInvalid }

func invalid(format string, args ...any) error {
	return &InvalidReceiptError{Reason: fmt.Sprintf(format, args...)}
}

// VerifiedReceipt is a receipt whose signature checked out.
type VerifiedReceipt struct {
	Receipt Receipt
	KeyID   string
}

// VerifyReceipt checks that jws is a receipt signed by one of keys and,
// unless issuer is empty, issued by issuer. It needs nothing else, so that
// receipts can be checked offline against a saved JWKS.
func VerifyReceipt(jws string, keys jose.JSONWebKeySet, issuer string) (VerifiedReceipt, error) {
	jws = strings.TrimSpace(jws)
	if jws == "" {
		return VerifiedReceipt{}, invalid("it is empty")
	}
	if len(jws) > maxReceipt {
		return VerifiedReceipt{}, invalid("it is longer than any receipt")
	}
	sig, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return VerifiedReceipt{}, invalid("it is not a compact JWS signed with ES256")
	}
	if len(sig.Signatures) != 1 {
		return VerifiedReceipt{}, invalid("it has more than one signature")
	}
	h := sig.Signatures[0].Header
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != ReceiptType {
		return VerifiedReceipt{}, invalid("its typ is %q, not %q", typ, ReceiptType)
	}
	found := keys.Key(h.KeyID)
	if len(found) == 0 {
		return VerifiedReceipt{}, &InvalidReceiptError{UnknownKey: true,
			Reason: fmt.Sprintf("it is signed with key %q, which is not one of flowd's receipt keys", h.KeyID)}
	}
	payload, err := sig.Verify(found[0])
	if err != nil {
		return VerifiedReceipt{}, invalid("its signature does not match its content: it was changed after signing")
	}
	var r Receipt
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return VerifiedReceipt{}, invalid("its claims are not those of a consent receipt")
	}
	if issuer != "" && r.Issuer != issuer {
		return VerifiedReceipt{}, invalid("it was issued by %q, not %q", r.Issuer, issuer)
	}
	switch r.Decision {
	case flows.DecisionAccepted, flows.DecisionRejected, flows.DecisionWithdrawn:
	default:
		return VerifiedReceipt{}, invalid("its decision %q is unknown", r.Decision)
	}
	return VerifiedReceipt{Receipt: r, KeyID: h.KeyID}, nil
}

// ReceiptChecker is what the web layer and the CLI need of receipts.
type ReceiptChecker interface {
	// Verify checks that jws is a receipt flowd signed, against the
	// receipt keys it publishes. An *InvalidReceiptError says why not.
	Verify(ctx context.Context, jws string) (VerifiedReceipt, error)
	// SubjectMatches reports whether nationalID is the person r was issued
	// for. Only r's own organization may ask: the caller checks that.
	SubjectMatches(ctx context.Context, r Receipt, nationalID string) (bool, error)
}

// ReceiptService signs the receipts of the journey's decisions and of
// withdrawals, checks receipts, and tells an organization whether a person
// is a receipt's subject.
type ReceiptService struct {
	pool   *pgxpool.Pool
	signer ReceiptSigner
	orgs   OrganizationNames
	issuer string

	mu         sync.Mutex
	salts      map[string][]byte // by organization; a salt never changes
	keys       jose.JSONWebKeySet
	keysLoaded time.Time
}

// receiptKeysMaxAge is how long Verify trusts the receipt keys it loaded;
// a receipt signed by a key it has not seen reloads them sooner.
const receiptKeysMaxAge = time.Minute

var _ ReceiptChecker = (*ReceiptService)(nil)

// NewReceipts returns the receipt service; orgs gives the organization's
// registered name, and issuer is the receipts' iss, flowd's base URL, whose
// /oauth/jwks publishes the keys.
func NewReceipts(pool *pgxpool.Pool, signer ReceiptSigner, orgs OrganizationNames, issuer string) *ReceiptService {
	return &ReceiptService{pool: pool, signer: signer, orgs: orgs, issuer: strings.TrimRight(issuer, "/"),
		salts: map[string][]byte{}}
}

// receiptFacts are what a receipt states: the flow as locked for the
// decision or withdrawal, the text it pinned, and what was decided.
type receiptFacts struct {
	Flow     flows.Flow
	Text     Version
	Decision string    // flows.DecisionAccepted, DecisionRejected or DecisionWithdrawn
	At       time.Time // when it was decided or withdrawn
	// Evidence is the decision's: the new one for a decision, the one the
	// acceptance recorded for its withdrawal.
	Evidence flows.Evidence
	// Previous is the id of the receipt a withdrawal supersedes; empty when
	// the acceptance has none (it came before receipts existed).
	Previous    string
	WithdrawnBy string // flows.ByIndividual or ByOrganization, for a withdrawal
}

// signTx signs the receipt of in. It reads and writes only through tx.
func (s *ReceiptService) signTx(ctx context.Context, tx database.Tx, in receiptFacts) (flows.SignedReceipt, error) {
	f := in.Flow
	salt, err := s.saltTx(ctx, tx, f.OrganizationID)
	if err != nil {
		return flows.SignedReceipt{}, err
	}
	// The organization is named by its registered name; the recipient as
	// the definition names it: the text the person saw.
	orgName, err := s.orgs.OrganizationName(ctx, f.OrganizationID)
	if err != nil {
		return flows.SignedReceipt{}, fmt.Errorf("consent: the organization of a receipt: %w", err)
	}
	r := Receipt{
		Issuer: s.issuer, ID: uuid.Must(uuid.NewV7()).String(), IssuedAt: in.At.Unix(),
		FlowID: f.ID, ReferenceID: f.ReferenceID, OrganizationID: f.OrganizationID, OrganizationName: orgName,
		Recipient: in.Text.Recipient,
		Definition: ReceiptDefinition{ID: f.FlowDefinitionID, Version: f.FlowDefinitionVersion,
			TextSHA256: hex.EncodeToString(in.Evidence.TextSHA256), Language: in.Evidence.Language},
		Decision: in.Decision, Subject: subjectHash(salt, f.NationalID), Previous: in.Previous,
	}
	if in.Decision == flows.DecisionWithdrawn {
		r.WithdrawnBy = in.WithdrawnBy
	}
	if v := in.Evidence.ValidUntil; v != nil && in.Decision != flows.DecisionRejected {
		r.ValidUntil = v.UTC().Format(time.RFC3339)
	}
	if in.Evidence.AssuranceLevel != "" {
		r.Assurance = &ReceiptAssurance{Level: in.Evidence.AssuranceLevel, ACR: in.Evidence.ACR}
	}
	claims, err := json.Marshal(r)
	if err != nil {
		return flows.SignedReceipt{}, err
	}
	jws, err := s.signer.SignReceiptTx(ctx, tx, claims)
	if err != nil {
		return flows.SignedReceipt{}, err
	}
	return flows.SignedReceipt{ID: r.ID, JWS: jws}, nil
}

// Verify implements ReceiptChecker.
func (s *ReceiptService) Verify(ctx context.Context, jws string) (VerifiedReceipt, error) {
	keys, err := s.receiptKeys(ctx, false)
	if err != nil {
		return VerifiedReceipt{}, err
	}
	v, err := VerifyReceipt(jws, keys, s.issuer)
	var bad *InvalidReceiptError
	if errors.As(err, &bad) && bad.UnknownKey {
		// Another instance may have rotated since the keys were loaded.
		if keys, err = s.receiptKeys(ctx, true); err != nil {
			return VerifiedReceipt{}, err
		}
		v, err = VerifyReceipt(jws, keys, s.issuer)
	}
	return v, err
}

// receiptKeys returns the receipt keys, loaded at most once a second when
// reload asks and otherwise once a minute.
func (s *ReceiptService) receiptKeys(ctx context.Context, reload bool) (jose.JSONWebKeySet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	age := time.Since(s.keysLoaded)
	if age < receiptKeysMaxAge && (!reload || age < time.Second) {
		return s.keys, nil
	}
	keys, err := s.signer.ReceiptKeys(ctx)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	s.keys, s.keysLoaded = keys, time.Now()
	return keys, nil
}

// SubjectMatches implements ReceiptChecker.
func (s *ReceiptService) SubjectMatches(ctx context.Context, r Receipt, nationalID string) (bool, error) {
	salt, err := s.salt(ctx, r.OrganizationID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	want := subjectHash(salt, nationalID)
	return hmac.Equal([]byte(want), []byte(r.Subject)), nil
}

// subjectHash is a receipt's subject: HMAC-SHA-256 under the
// organization's salt of the national id as the journey compares it.
func subjectHash(salt []byte, nationalID string) string {
	mac := hmac.New(sha256.New, salt)
	mac.Write([]byte(nationalid.Normalize(nationalID)))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// saltTx returns the organization's subject salt, making it in tx on first use.
func (s *ReceiptService) saltTx(ctx context.Context, tx database.Tx, organizationID string) ([]byte, error) {
	if salt := s.cachedSalt(organizationID); salt != nil {
		return salt, nil
	}
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh)
	tag, err := tx.Exec(ctx, `insert into receipt_subject_salts (organization_id, salt) values ($1, $2)
		on conflict (organization_id) do nothing`, organizationID, fresh)
	if err != nil {
		return nil, fmt.Errorf("consent: receipt subject salt: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return fresh, nil // cached once another call finds it committed
	}
	var salt []byte
	if err := tx.QueryRow(ctx, `select salt from receipt_subject_salts where organization_id = $1`, organizationID).Scan(&salt); err != nil {
		return nil, fmt.Errorf("consent: receipt subject salt: %w", err)
	}
	s.mu.Lock()
	s.salts[organizationID] = salt
	s.mu.Unlock()
	return salt, nil
}

// salt returns the organization's subject salt; pgx.ErrNoRows before its first receipt.
func (s *ReceiptService) salt(ctx context.Context, organizationID string) ([]byte, error) {
	if salt := s.cachedSalt(organizationID); salt != nil {
		return salt, nil
	}
	var salt []byte
	err := s.pool.QueryRow(ctx, `select salt from receipt_subject_salts where organization_id = $1`, organizationID).Scan(&salt)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.salts[organizationID] = salt
	s.mu.Unlock()
	return salt, nil
}

func (s *ReceiptService) cachedSalt(organizationID string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.salts[organizationID]
}
