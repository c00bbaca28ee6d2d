// Package dpopproof checks DPoP proofs (RFC 9449): their form, key,
// signature and claims against the request, the server nonce, and this
// instance's memory of the proofs it has seen. Whether a proof was used
// before on any instance is the database's to decide.
package dpopproof

import (
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
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// The acceptance window of a DPoP proof's iat (RFC 9449 11.1). A proof is
// made for one request just before it is sent, so a minute covers the
// network and a client's slow start while keeping short the life of a proof
// an attacker might have copied or pre-generated; the replay table keeps each
// jti for the window only, so a longer one would also keep more rows. A few
// seconds in the future forgive a client's clock running slightly ahead.
const (
	MaxAge    = 60 * time.Second
	MaxFuture = 5 * time.Second
)

// Algorithms are the signature algorithms accepted for DPoP proofs:
// asymmetric only, so "none" and HMAC are refused before any key is used.
var Algorithms = []jose.SignatureAlgorithm{jose.ES256, jose.PS256, jose.RS256}

// Error codes of DPoP (RFC 9449 5 and 7.1), at the token endpoint and in
// resource servers' challenges.
const (
	CodeInvalidProof = "invalid_dpop_proof"
	CodeUseNonce     = "use_dpop_nonce"
)

// Request is what a request offers for DPoP: its DPoP header values,
// its method and its path. The htu a proof must name is the configured
// issuer (FLOWD_BASE_URL) and the path: never the Host header, which the
// caller chooses.
// It is comparable, as the token request that holds it must stay.
type Request struct {
	Proof   string // the DPoP header's value
	Headers int    // how many DPoP headers the request carried: a proof needs exactly one
	Method  string
	Path    string // the request URL's escaped path
}

// NewRequest makes the Request of a request's DPoP header values.
func NewRequest(values []string, method, path string) Request {
	r := Request{Headers: len(values), Method: method, Path: path}
	if len(values) == 1 {
		r.Proof = values[0]
	}
	return r
}

// Present reports whether the request carries a DPoP header at all.
func (r Request) Present() bool { return r.Headers > 0 }

// Error is why a DPoP proof was refused: CodeInvalidProof or CodeUseNonce,
// with a Description safe to show the caller.
type Error struct {
	Code        string
	Description string
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// Checker checks the proofs sent to one issuer.
type Checker struct {
	issuer        string
	nonceRequired bool
	nonceKey      []byte
	now           func() time.Time
}

// NewChecker returns the checker of proofs sent to issuer; nonceRequired
// makes proofs carry a server nonce, whose key is derived from kek.
func NewChecker(issuer string, nonceRequired bool, kek []byte, now func() time.Time) *Checker {
	return &Checker{issuer: issuer, nonceRequired: nonceRequired, nonceKey: nonceKey(kek), now: now}
}

// NonceStep is the life of a server nonce (RFC 9449 8): one is valid in
// the step it was made and the next, so between five and ten minutes.
const NonceStep = 5 * time.Minute

// Bounds on what a proof may hold, so that a hostile one costs little.
const (
	maxProofLen = 8 << 10
	maxJTILen   = 256
)

// Proof is what a verified proof establishes.
type Proof struct {
	JKT string // the RFC 7638 SHA-256 thumbprint of its key, base64url
	JTI string
}

// claims are the claims of a proof (RFC 9449 4.2).
type claims struct {
	JTI   string   `json:"jti"`
	HTM   string   `json:"htm"`
	HTU   string   `json:"htu"`
	IAT   *float64 `json:"iat"`
	ATH   string   `json:"ath"`
	Nonce string   `json:"nonce"`
}

// BadProof is the refusal of a proof, with why.
func BadProof(desc string) error {
	return &Error{Code: CodeInvalidProof, Description: desc}
}

// Check verifies the request's proof (RFC 9449 4.3) except for
// replay, which the caller decides once everything else has passed.
// accessToken, when not empty, is the token the proof must name in ath.
// Failures are *Error values.
func (s *Checker) Check(in Request, accessToken string) (Proof, error) {
	if in.Headers != 1 {
		return Proof{}, BadProof("Send exactly one DPoP header.")
	}
	raw := in.Proof
	if raw == "" || len(raw) > maxProofLen {
		return Proof{}, BadProof("The DPoP proof is empty or too long.")
	}
	jws, err := jose.ParseSignedCompact(raw, Algorithms)
	if err != nil || len(jws.Signatures) != 1 {
		return Proof{}, BadProof("The DPoP proof must be a compact JWS signed with " + algorithmNames + " and carry a public jwk.")
	}
	header := jws.Signatures[0].Protected
	if typ, _ := header.ExtraHeaders[jose.HeaderType].(string); typ != "dpop+jwt" {
		return Proof{}, BadProof("The DPoP proof's typ must be dpop+jwt.")
	}
	key := header.JSONWebKey
	if desc := checkKey(key, header.Algorithm); desc != "" {
		return Proof{}, BadProof(desc)
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return Proof{}, BadProof("The DPoP proof's signature does not verify with its jwk.")
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Proof{}, BadProof("The DPoP proof's claims are not a JSON object of the expected types.")
	}
	if desc := s.checkClaims(c, in, accessToken); desc != "" {
		return Proof{}, BadProof(desc)
	}
	if s.nonceRequired && !s.nonceValid(c.Nonce) {
		return Proof{}, &Error{Code: CodeUseNonce, Description: "The DPoP proof must carry the nonce of the DPoP-Nonce header."}
	}
	sum, err := key.Thumbprint(crypto.SHA256)
	if err != nil {
		return Proof{}, BadProof("The DPoP proof's jwk has no thumbprint.")
	}
	return Proof{JKT: base64.RawURLEncoding.EncodeToString(sum), JTI: c.JTI}, nil
}

// checkKey returns why a proof's jwk cannot sign proofs, empty when it
// can: a public key that fits the algorithm, RSA of at least 2048 bits.
func checkKey(key *jose.JSONWebKey, alg string) string {
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

// checkClaims returns why a proof's claims do not fit the request,
// empty when they do.
func (s *Checker) checkClaims(c claims, in Request, accessToken string) string {
	now := s.now()
	switch {
	case c.JTI == "" || len(c.JTI) > maxJTILen:
		return "The DPoP proof needs a jti of at most 256 characters."
	case c.HTM != in.Method:
		return "The DPoP proof's htm is not this request's method."
	case !sameHTU(c.HTU, s.issuer+in.Path):
		return "The DPoP proof's htu is not this request's URL without query and fragment."
	case c.IAT == nil:
		return "The DPoP proof needs an iat."
	}
	iat := time.Unix(int64(*c.IAT), 0)
	switch {
	case now.Sub(iat) > MaxAge:
		return "The DPoP proof is too old: its iat must be within 60 seconds of the server's clock."
	case iat.Sub(now) > MaxFuture:
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

// Nonce is the current server nonce, empty when proofs need none.
func (s *Checker) Nonce() string {
	if !s.nonceRequired {
		return ""
	}
	return s.NonceAt(s.now().Unix() / int64(NonceStep/time.Second))
}

// NonceAt is the nonce of a time step: an HMAC of the step under a key
// every instance derives alike, so any instance accepts any other's nonce
// without shared state.
func (s *Checker) NonceAt(step int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(step))
	mac := hmac.New(sha256.New, s.nonceKey)
	mac.Write(b[:])
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:18])
}

// nonceValid reports whether nonce is the current step's or the previous one's.
func (s *Checker) nonceValid(nonce string) bool {
	step := s.now().Unix() / int64(NonceStep/time.Second)
	return slices.ContainsFunc([]int64{step, step - 1}, func(at int64) bool {
		return hmac.Equal([]byte(nonce), []byte(s.NonceAt(at)))
	})
}

// nonceKey derives the nonce key from the key-encryption key with a
// fixed label, so that nonces reveal nothing of it and need no setting of
// their own. Without a key-encryption key (a verifying-only service in
// tests) the key is random, good for this instance only.
func nonceKey(kek []byte) []byte {
	if len(kek) == 0 {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		return k
	}
	mac := hmac.New(sha256.New, kek)
	mac.Write([]byte("flowd DPoP nonce key v1"))
	return mac.Sum(nil)
}

// algorithmNames is Algorithms by name, for the refusal of another one.
var algorithmNames = func() string {
	names := make([]string, len(Algorithms))
	for i, a := range Algorithms {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}()
