// Package receipts signs the consent receipts of decisions and withdrawals,
// verifies them, online against the keys flowd publishes or offline against
// a saved key set, and tells an organization whether a person is a
// receipt's subject.
package receipts

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

	"github.com/flowd/flowd/internal/cache"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows"
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
	Recipient  string     `json:"recipient,omitempty"`
	Definition Definition `json:"definition"`
	// Parameters are the flow's values of its definition's parameters,
	// which the text hash covers too; absent when it has none.
	Parameters map[string]string `json:"parameters,omitempty"`
	Decision   string            `json:"decision"` // accepted, rejected or withdrawn
	// ValidUntil is when an acceptance with a validity ends (RFC 3339).
	ValidUntil string `json:"validUntil,omitempty"`
	// Assurance is null when the deployment turned the eID proof off.
	Assurance *Assurance `json:"assurance"`
	Subject   string     `json:"subject"`
	// Previous is the jti of the receipt a withdrawal supersedes.
	Previous string `json:"previous,omitempty"`
	// WithdrawnBy says who withdrew: "individual" or "organization".
	WithdrawnBy string `json:"withdrawnBy,omitempty"`
}

// Definition names the text consented to: the definition version and
// the SHA-256 of its canonical text, and the language it was shown in.
type Definition struct {
	ID         string `json:"id"`
	Version    int    `json:"version"`
	TextSHA256 string `json:"textSha256"`
	Language   string `json:"language"`
}

// Assurance is how sure the eID was of the person.
type Assurance struct {
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

// Signer signs receipts and gives the keys that verify them: the
// identity module, whose JWKS publishes those keys.
type Signer interface {
	// SignReceiptTx signs claims as a compact JWS with the receipt key that
	// signs now, under the JOSE typ header typ, reading the key through tx
	// if it must.
	SignReceiptTx(ctx context.Context, tx database.Tx, typ string, claims []byte) (string, error)
	// ReceiptKeys returns the public keys of every receipt that may still be
	// checked.
	ReceiptKeys(ctx context.Context) (jose.JSONWebKeySet, error)
}

// OrganizationNames gives an organization's registered name, by which a
// receipt names who asked for the consent.
type OrganizationNames interface {
	OrganizationName(ctx context.Context, organizationID string) (string, error)
}

// Type is the JOSE typ header of every consent receipt (an erasure
// receipt's is another).
const Type = "consent-receipt+jwt"

// maxReceipt bounds what Verify reads: a receipt is about a kilobyte.
const maxReceipt = 16 << 10

// ErrInvalid is what Verify returns for anything that is not
// a receipt flowd signed; the wrapping error says why, for people.
var ErrInvalid = errors.New("not a valid consent receipt")

// InvalidError is an ErrInvalid with its reason.
type InvalidError struct {
	Reason string
	// UnknownKey is set when no key of the set has the receipt's kid.
	UnknownKey bool
}

func (e *InvalidError) Error() string { return ErrInvalid.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

// Verified is a receipt whose signature checked out.
type Verified struct {
	Receipt Receipt
	KeyID   string
}

// Verify checks that jws is a receipt signed by one of keys and,
// unless issuer is empty, issued by issuer. It needs nothing else, so that
// receipts can be checked offline against a saved JWKS.
func Verify(jws string, keys jose.JSONWebKeySet, issuer string) (Verified, error) {
	jws = strings.TrimSpace(jws)
	if jws == "" {
		return Verified{}, invalid("it is empty")
	}
	if len(jws) > maxReceipt {
		return Verified{}, invalid("it is longer than any receipt")
	}
	sig, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return Verified{}, invalid("it is not a compact JWS signed with ES256")
	}
	if len(sig.Signatures) != 1 {
		return Verified{}, invalid("it has more than one signature")
	}
	h := sig.Signatures[0].Header
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != Type {
		return Verified{}, invalid("its typ is %q, not %q", typ, Type)
	}
	found := keys.Key(h.KeyID)
	if len(found) == 0 {
		return Verified{}, &InvalidError{UnknownKey: true,
			Reason: fmt.Sprintf("it is signed with key %q, which is not one of flowd's receipt keys", h.KeyID)}
	}
	payload, err := sig.Verify(found[0])
	if err != nil {
		return Verified{}, invalid("its signature does not match its content: it was changed after signing")
	}
	var r Receipt
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Verified{}, invalid("its claims are not those of a consent receipt")
	}
	if issuer != "" && r.Issuer != issuer {
		return Verified{}, invalid("it was issued by %q, not %q", r.Issuer, issuer)
	}
	switch r.Decision {
	case flows.DecisionAccepted, flows.DecisionRejected, flows.DecisionWithdrawn:
	default:
		return Verified{}, invalid("its decision %q is unknown", r.Decision)
	}
	return Verified{Receipt: r, KeyID: h.KeyID}, nil
}

// Checker is what the web layer and the CLI need of receipts.
type Checker interface {
	// Verify checks that jws is a receipt flowd signed, against the
	// receipt keys it publishes. An *InvalidError says why not.
	Verify(ctx context.Context, jws string) (Verified, error)
	// SubjectMatches reports whether person, a national id in its
	// canonical form, is whom subject names in organizationID's receipts,
	// consent and erasure receipts alike. Only the receipt's own
	// organization may ask: the caller checks that.
	SubjectMatches(ctx context.Context, organizationID, subject, person string) (bool, error)
}

// Service signs the receipts of the journey's decisions and of
// withdrawals, checks receipts, and tells an organization whether a person
// is a receipt's subject.
type Service struct {
	pool   *pgxpool.Pool
	signer Signer
	orgs   OrganizationNames
	issuer string

	mu         sync.Mutex
	salts      map[string][]byte // by organization; a salt never changes
	keys       jose.JSONWebKeySet
	keysLoaded time.Time
	// verified holds the receipts found genuine under keys, by the SHA-256
	// of their JWS: a receipt never changes, and the person's own page
	// checks the same ones on every view. Loading the keys again forgets
	// them.
	verified *cache.Map[[sha256.Size]byte, Verified]
}

// maxVerified bounds the receipts Verify remembers: one forgotten costs
// only a check made again.
const maxVerified = 4096

// receiptKeysMaxAge is how long Verify trusts the receipt keys it loaded;
// a receipt signed by a key it has not seen reloads them sooner.
const receiptKeysMaxAge = time.Minute

var _ Checker = (*Service)(nil)

// New returns the receipt service; orgs gives the organization's
// registered name, and issuer is the receipts' iss, flowd's base URL, whose
// /oauth/jwks publishes the keys.
func New(pool *pgxpool.Pool, signer Signer, orgs OrganizationNames, issuer string) *Service {
	return &Service{pool: pool, signer: signer, orgs: orgs, issuer: strings.TrimRight(issuer, "/"),
		salts: map[string][]byte{}, verified: cache.New[[sha256.Size]byte, Verified](maxVerified)}
}

// Facts are what a receipt states: the flow as locked for the
// decision or withdrawal, who receives the data as the text it pinned
// names them, and what was decided.
type Facts struct {
	Flow      flows.Flow
	Recipient string
	Decision  string    // flows.DecisionAccepted, DecisionRejected or DecisionWithdrawn
	At        time.Time // when it was decided or withdrawn
	// Evidence is the decision's: the new one for a decision, the one the
	// acceptance recorded for its withdrawal.
	Evidence flows.Evidence
	// Previous is the id of the receipt a withdrawal supersedes; empty when
	// the acceptance has none (it came before receipts existed).
	Previous    string
	WithdrawnBy string // flows.ByIndividual or ByOrganization, for a withdrawal
}

// SignTx signs the receipt of in. It reads and writes only through tx.
func (s *Service) SignTx(ctx context.Context, tx database.Tx, in Facts) (flows.SignedReceipt, error) {
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
		Recipient: in.Recipient,
		Definition: Definition{ID: f.FlowDefinitionID, Version: f.FlowDefinitionVersion,
			TextSHA256: hex.EncodeToString(in.Evidence.TextSHA256), Language: in.Evidence.Language},
		Parameters: f.Parameters,
		Decision:   in.Decision, Subject: subjectHash(salt, f.Person), Previous: in.Previous,
	}
	if in.Decision == flows.DecisionWithdrawn {
		r.WithdrawnBy = in.WithdrawnBy
	}
	if v := in.Evidence.ValidUntil; v != nil && in.Decision != flows.DecisionRejected {
		r.ValidUntil = v.UTC().Format(time.RFC3339)
	}
	if in.Evidence.AssuranceLevel != "" {
		r.Assurance = &Assurance{Level: in.Evidence.AssuranceLevel, ACR: in.Evidence.ACR}
	}
	claims, err := json.Marshal(r)
	if err != nil {
		return flows.SignedReceipt{}, err
	}
	jws, err := s.signer.SignReceiptTx(ctx, tx, Type, claims)
	if err != nil {
		return flows.SignedReceipt{}, err
	}
	return flows.SignedReceipt{ID: r.ID, JWS: jws}, nil
}

// Verify implements Checker.
func (s *Service) Verify(ctx context.Context, jws string) (Verified, error) {
	sum := sha256.Sum256([]byte(jws))
	keys, gen, v, known, err := s.receiptKeysFor(ctx, sum, false)
	if err != nil || known {
		return v, err
	}
	v, err = Verify(jws, keys, s.issuer)
	var bad *InvalidError
	if errors.As(err, &bad) && bad.UnknownKey {
		// Another instance may have rotated since the keys were loaded.
		if keys, gen, _, _, err = s.receiptKeysFor(ctx, sum, true); err != nil {
			return Verified{}, err
		}
		v, err = Verify(jws, keys, s.issuer)
	}
	if err == nil {
		s.remember(sum, gen, v)
	}
	return v, err
}

// receiptKeysFor returns the receipt keys, loaded at most once a second
// when reload asks and otherwise once a minute, with the verified cache's
// generation they came with, and, when the receipt whose JWS has the
// SHA-256 sum was found genuine under them, what was found.
func (s *Service) receiptKeysFor(ctx context.Context, sum [sha256.Size]byte, reload bool) (jose.JSONWebKeySet, uint64, Verified, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	age := time.Since(s.keysLoaded)
	if age >= receiptKeysMaxAge || (reload && age >= time.Second) {
		keys, err := s.signer.ReceiptKeys(ctx)
		if err != nil {
			return jose.JSONWebKeySet{}, 0, Verified{}, false, err
		}
		s.keys, s.keysLoaded = keys, time.Now()
		s.verified.Clear()
	}
	v, ok := s.verified.Get(sum)
	return s.keys, s.verified.Gen(), v, ok, nil
}

// remember keeps v, found under the keys that came with generation gen,
// unless the keys were loaded again meanwhile.
func (s *Service) remember(sum [sha256.Size]byte, gen uint64, v Verified) {
	s.verified.PutIf(gen, sum, v)
}

// SubjectMatches implements Checker.
func (s *Service) SubjectMatches(ctx context.Context, organizationID, subject, person string) (bool, error) {
	salt, err := s.salt(ctx, organizationID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	want := subjectHash(salt, person)
	return hmac.Equal([]byte(want), []byte(subject)), nil
}

// subjectHash is a receipt's subject: HMAC-SHA-256 under the
// organization's salt of the person's national id in its canonical form,
// as the journey compares it.
func subjectHash(salt []byte, person string) string {
	mac := hmac.New(sha256.New, salt)
	mac.Write([]byte(person))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// saltTx returns the organization's subject salt, making it in tx on first use.
func (s *Service) saltTx(ctx context.Context, tx database.Tx, organizationID string) ([]byte, error) {
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
func (s *Service) salt(ctx context.Context, organizationID string) ([]byte, error) {
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

func (s *Service) cachedSalt(organizationID string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.salts[organizationID]
}
