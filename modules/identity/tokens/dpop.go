package tokens

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

// dpopNonceStep is the life of a server nonce (RFC 9449 8): one is valid in
// the step it was made and the next, so between five and ten minutes.
const dpopNonceStep = 5 * time.Minute

// Bounds on what a proof may hold, so that a hostile one costs little.
const (
	maxDPoPProofLen = 8 << 10
	maxDPoPJTILen   = 256
)

// confirmation is the cnf claim of a DPoP-bound access token (RFC 9449 6.1).
type confirmation struct {
	JKT string `json:"jkt"`
}

// dpopProof is what a verified proof establishes.
type dpopProof struct {
	jkt string // the RFC 7638 SHA-256 thumbprint of its key, base64url
	jti string
}

// dpopClaims are the claims of a proof (RFC 9449 4.2).
type dpopClaims struct {
	JTI   string   `json:"jti"`
	HTM   string   `json:"htm"`
	HTU   string   `json:"htu"`
	IAT   *float64 `json:"iat"`
	ATH   string   `json:"ath"`
	Nonce string   `json:"nonce"`
}

func badProof(desc string) error {
	return &DPoPError{Code: ErrCodeInvalidDPoPProof, Description: desc}
}

// checkDPoPProof verifies the request's proof (RFC 9449 4.3) except for
// replay, which spendDPoPProof decides once everything else has passed.
// accessToken, when not empty, is the token the proof must name in ath.
// Failures are *DPoPError values.
func (s *Service) checkDPoPProof(in DPoPRequest, accessToken string) (dpopProof, error) {
	if in.Headers != 1 {
		return dpopProof{}, badProof("Send exactly one DPoP header.")
	}
	raw := in.Proof
	if raw == "" || len(raw) > maxDPoPProofLen {
		return dpopProof{}, badProof("The DPoP proof is empty or too long.")
	}
	jws, err := jose.ParseSignedCompact(raw, DPoPAlgorithms)
	if err != nil || len(jws.Signatures) != 1 {
		return dpopProof{}, badProof("The DPoP proof must be a compact JWS signed with " + strings.Join(DPoPAlgorithmNames, ", ") + " and carry a public jwk.")
	}
	header := jws.Signatures[0].Protected
	if typ, _ := header.ExtraHeaders[jose.HeaderType].(string); typ != "dpop+jwt" {
		return dpopProof{}, badProof("The DPoP proof's typ must be dpop+jwt.")
	}
	key := header.JSONWebKey
	if desc := checkDPoPKey(key, header.Algorithm); desc != "" {
		return dpopProof{}, badProof(desc)
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return dpopProof{}, badProof("The DPoP proof's signature does not verify with its jwk.")
	}
	var c dpopClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return dpopProof{}, badProof("The DPoP proof's claims are not a JSON object of the expected types.")
	}
	if desc := s.checkDPoPClaims(c, in, accessToken); desc != "" {
		return dpopProof{}, badProof(desc)
	}
	if s.cfg.DPoPNonceRequired && !s.dpopNonceValid(c.Nonce) {
		return dpopProof{}, &DPoPError{Code: ErrCodeUseDPoPNonce, Description: "The DPoP proof must carry the nonce of the DPoP-Nonce header."}
	}
	sum, err := key.Thumbprint(crypto.SHA256)
	if err != nil {
		return dpopProof{}, badProof("The DPoP proof's jwk has no thumbprint.")
	}
	return dpopProof{jkt: base64.RawURLEncoding.EncodeToString(sum), jti: c.JTI}, nil
}

// checkDPoPKey returns why a proof's jwk cannot sign proofs, empty when it
// can: a public key that fits the algorithm, RSA of at least 2048 bits.
func checkDPoPKey(key *jose.JSONWebKey, alg string) string {
	if key == nil || !key.Valid() || !key.IsPublic() {
		return "The DPoP proof's header must carry the public key as jwk."
	}
	switch k := key.Key.(type) {
	case *ecdsa.PublicKey:
		if alg != string(jose.ES256) || k.Curve != elliptic.P256() {
			return "An EC jwk must be on P-256 and sign with ES256."
		}
	case *rsa.PublicKey:
		if alg != string(jose.PS256) && alg != string(jose.RS256) {
			return "An RSA jwk must sign with PS256 or RS256."
		}
		if k.N.BitLen() < 2048 {
			return "An RSA jwk must have at least 2048 bits."
		}
	default:
		return "The DPoP proof's jwk must be an EC (P-256) or RSA key."
	}
	return ""
}

// checkDPoPClaims returns why a proof's claims do not fit the request,
// empty when they do.
func (s *Service) checkDPoPClaims(c dpopClaims, in DPoPRequest, accessToken string) string {
	now := s.now()
	switch {
	case c.JTI == "" || len(c.JTI) > maxDPoPJTILen:
		return "The DPoP proof needs a jti of at most 256 characters."
	case c.HTM != in.Method:
		return "The DPoP proof's htm is not this request's method."
	case !sameHTU(c.HTU, s.cfg.Issuer+in.Path):
		return "The DPoP proof's htu is not this request's URL without query and fragment."
	case c.IAT == nil:
		return "The DPoP proof needs an iat."
	}
	iat := time.Unix(int64(*c.IAT), 0)
	switch {
	case now.Sub(iat) > DPoPProofMaxAge:
		return "The DPoP proof is too old: its iat must be within 60 seconds of the server's clock."
	case iat.Sub(now) > DPoPProofMaxFuture:
		return "The DPoP proof's iat is in the future."
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		if !hmac.Equal([]byte(c.ATH), []byte(base64.RawURLEncoding.EncodeToString(sum[:]))) {
			return "The DPoP proof's ath is not the hash of the access token."
		}
	}
	return ""
}

// sameHTU compares a proof's htu with the request's URL as RFC 9449 4.3
// asks: without query and fragment, after normalizing the scheme's and the
// host's case and the default port (RFC 3986 6.2.2 and 6.2.3).
func sameHTU(htu, want string) bool {
	a, ok := normalizeHTU(htu)
	if !ok {
		return false
	}
	b, ok := normalizeHTU(want)
	return ok && a == b
}

func normalizeHTU(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	switch {
	case port != "":
		host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		host = "[" + host + "]"
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, true
}

// spendDPoPProof accepts a proof's jti once per key across every instance:
// the insert into dpop_proofs decides, and this instance's memory of the
// proofs it saw spares the database an obvious replay. A replay is a
// *DPoPError.
func (s *Service) spendDPoPProof(ctx context.Context, p dpopProof) error {
	now := s.now()
	key := p.jkt + " " + p.jti
	replay := badProof("The DPoP proof was used before: make a new one for every request.")
	if s.dpopSeen.has(key, now) {
		return replay
	}
	// Past this, the proof's iat is out of the window wherever it is checked.
	expires := now.Add(DPoPProofMaxAge + DPoPProofMaxFuture)
	fresh, err := store.SpendDPoPProof(ctx, s.pool, p.jkt, p.jti, expires)
	if err != nil {
		return database.Classify(err)
	}
	s.dpopSeen.add(key, expires, now)
	if !fresh {
		return replay
	}
	return nil
}

// tokenDPoP checks a token request's proof (htm POST, htu the token
// endpoint) and returns its key's thumbprint, which binds the access token;
// empty when there is no proof, which a client required to use DPoP may not
// send. Failures are *TokenError values.
func (s *Service) tokenDPoP(ctx context.Context, c orgs.StoredClient, in DPoPRequest) (string, error) {
	if !in.Present() {
		if c.DPoPBound {
			// RFC 9449 5.2 names no code for the missing proof; the one
			// for a bad proof tells DPoP clients what to fix.
			return "", tokenErr(ErrCodeInvalidDPoPProof, "This client must send a DPoP proof with its token requests.")
		}
		return "", nil
	}
	p, err := s.checkDPoPProof(in, "")
	if err == nil {
		err = s.spendDPoPProof(ctx, p)
	}
	var de *DPoPError
	if errors.As(err, &de) {
		return "", &TokenError{Code: de.Code, Description: de.Description}
	}
	if err != nil {
		return "", err
	}
	return p.jkt, nil
}

// VerifyDPoPAccessToken implements Verifier. The proof is spent last, so that a
// request refused for its token does not use it up.
func (s *Service) VerifyDPoPAccessToken(ctx context.Context, raw string, in DPoPRequest) (identity.Principal, error) {
	v, err := s.verifyToken(ctx, raw)
	if err != nil {
		return identity.Principal{}, err
	}
	if v.jkt == "" {
		s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		return identity.Principal{}, apperr.New(apperr.Unauthenticated, "The access token is not DPoP-bound: send it with the Bearer scheme.")
	}
	if !in.Present() {
		s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		return identity.Principal{}, resourceDPoPErr(badProof("A DPoP proof is required with the DPoP scheme."))
	}
	proof, err := s.checkDPoPProof(in, raw)
	if err != nil {
		s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		return identity.Principal{}, resourceDPoPErr(err)
	}
	if proof.jkt != v.jkt {
		s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		return identity.Principal{}, resourceDPoPErr(badProof("The DPoP proof is signed by another key than the one the access token is bound to."))
	}
	var p identity.Principal
	if v.external {
		p, err = s.admitExternal(ctx, v)
	} else {
		p, err = s.admitBuiltin(ctx, v)
	}
	if err != nil {
		return identity.Principal{}, err
	}
	if err := s.spendDPoPProof(ctx, proof); err != nil {
		if de := (*DPoPError)(nil); errors.As(err, &de) {
			s.refusals.WithLabelValues(string(refusedDPoP)).Inc()
		}
		return identity.Principal{}, resourceDPoPErr(err)
	}
	return p, nil
}

// resourceDPoPErr makes a proof's failure an Unauthenticated error of an
// API request that keeps the DPoP error code for the challenge.
func resourceDPoPErr(err error) error {
	var de *DPoPError
	if !errors.As(err, &de) {
		return err
	}
	return &apperr.Error{Code: apperr.Unauthenticated, Message: de.Description, Err: de}
}

// DPoPNonce implements Verifier.
func (s *Service) DPoPNonce() string {
	if !s.cfg.DPoPNonceRequired {
		return ""
	}
	return s.dpopNonceAt(s.now().Unix() / int64(dpopNonceStep/time.Second))
}

// dpopNonceAt is the nonce of a time step: an HMAC of the step under a key
// every instance derives alike, so any instance accepts any other's nonce
// without shared state.
func (s *Service) dpopNonceAt(step int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(step))
	mac := hmac.New(sha256.New, s.dpopNonceKey)
	mac.Write(b[:])
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:18])
}

// dpopNonceValid reports whether nonce is the current step's or the previous one's.
func (s *Service) dpopNonceValid(nonce string) bool {
	step := s.now().Unix() / int64(dpopNonceStep/time.Second)
	return slices.ContainsFunc([]int64{step, step - 1}, func(at int64) bool {
		return hmac.Equal([]byte(nonce), []byte(s.dpopNonceAt(at)))
	})
}

// dpopNonceKey derives the nonce key from the key-encryption key with a
// fixed label, so that nonces reveal nothing of it and need no setting of
// their own. Without a key-encryption key (a verifying-only service in
// tests) the key is random, good for this instance only.
func dpopNonceKey(kek []byte) []byte {
	if len(kek) == 0 {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		return k
	}
	mac := hmac.New(sha256.New, kek)
	mac.Write([]byte("flowd DPoP nonce key v1"))
	return mac.Sum(nil)
}

// thumbprint returns the cnf's jkt, empty when there is no cnf.
func (c *confirmation) thumbprint() string {
	if c == nil {
		return ""
	}
	return c.JKT
}

// errDPoPBoundAsBearer refuses a DPoP-bound token sent with the Bearer
// scheme: without a proof it would be a bearer token after all.
var errDPoPBoundAsBearer = apperr.New(apperr.Unauthenticated, "The access token is DPoP-bound: send it with the DPoP scheme and a DPoP proof.")

// seenProofs remembers the DPoP proofs (key thumbprint and jti) this
// instance accepted or refused as replays, until they leave the acceptance
// window: a replay sent to the same instance is refused without a database
// round trip. It only ever refuses; dpop_proofs decides what is accepted.
type seenProofs struct {
	mu      sync.Mutex
	entries map[string]time.Time
}

// seenProofsMax bounds the memory; past it, expired entries are dropped and,
// if that is not enough, everything (the database still refuses replays).
const seenProofsMax = 100_000

func (s *seenProofs) init() { s.entries = map[string]time.Time{} }

func (s *seenProofs) has(key string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.entries[key]
	return ok && now.Before(exp)
}

func (s *seenProofs) add(key string, expires, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) >= seenProofsMax {
		s.pruneLocked(now)
		if len(s.entries) >= seenProofsMax {
			clear(s.entries)
		}
	}
	s.entries[key] = expires
}

func (s *seenProofs) prune(now time.Time) {
	s.mu.Lock()
	s.pruneLocked(now)
	s.mu.Unlock()
}

func (s *seenProofs) pruneLocked(now time.Time) {
	for k, exp := range s.entries {
		if !now.Before(exp) {
			delete(s.entries, k)
		}
	}
}
