// Package keys is identity's part that keeps the signing keys: those of the
// built-in provider's access and ID tokens, and those of consent receipts.
// Keys live in signing_keys, their private part sealed under
// FLOWD_KEY_ENCRYPTION_KEY; one key of each role signs at a time, and a
// retired key stays published for as long as what it signed may be checked.
package keys

import (
	"context"
	"crypto/ecdsa"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/database"
)

// AccessTokenAlgorithm signs access tokens.
const AccessTokenAlgorithm = jose.ES256

// IDTokenAlgorithms are the algorithms of the built-in provider's ID tokens,
// the default first: RS256, which every OpenID relying party accepts, and
// ES256 for the clients that ask for it.
var IDTokenAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}

// The typ headers of consent tokens and of signed introspection answers
// (RFC 9701 5). A consent token is an access token, but not one of
// flowd's own API: a typ of its own keeps a verifier of either kind from
// taking the other (RFC 8725 3.11), whatever audiences are configured.
const (
	ConsentTokenType  = "consent-token+jwt"
	IntrospectionType = "token-introspection+jwt"
)

// ReceiptAlgorithm signs consent receipts: ES256 is in every JOSE library,
// and its signatures are short enough for a receipt to travel in a page.
const ReceiptAlgorithm = jose.ES256

// DefaultReceiptKeyRetention keeps receipt keys published for ten years:
// as long as records of consent are commonly kept.
const DefaultReceiptKeyRetention = 10 * 365 * 24 * time.Hour

// SigningKey names a signing key of the built-in provider.
type SigningKey struct {
	ID        string // the kid of its tokens and of its JWKS entry
	Algorithm string // its JOSE algorithm: ES256 or RS256
	Receipts  bool   // it signs consent receipts, not tokens
}

// Tokens signs the built-in provider's tokens and publishes the keys that
// verify them; the token service and the interactive login use it.
type Tokens interface {
	// SignAccessToken returns the compact JWS (typ at+jwt) of claims, signed
	// with the active AccessTokenAlgorithm key, its kid in the header.
	SignAccessToken(ctx context.Context, claims []byte) (string, error)
	// SignTypedToken returns the compact JWS of claims under the JOSE
	// header typ, one of TokenTypes, signed as SignAccessToken signs: the
	// same key verifies both, from the same JWKS.
	SignTypedToken(ctx context.Context, typ string, claims []byte) (string, error)
	// AccessTokenKey returns the public key of kid when it may still verify
	// access tokens: the active key, or one retired less than the tokens'
	// lifetime (and a margin) ago.
	AccessTokenKey(ctx context.Context, kid string) (*ecdsa.PublicKey, error)
	// SignIDToken returns the compact JWS of claims (a JSON-marshalable
	// value) signed with the active key of alg, one of IDTokenAlgorithms.
	SignIDToken(ctx context.Context, alg jose.SignatureAlgorithm, claims any) (string, error)
	// PublicJWKS returns the published keys (Publisher's) as a JOSE key set.
	PublicJWKS(ctx context.Context) (jose.JSONWebKeySet, error)
}

// Publisher publishes the public keys: the provider's /oauth/jwks.
type Publisher interface {
	// JWKS returns the JSON Web Key Set of the keys that sign, or signed
	// still-valid, tokens and receipts.
	JWKS(ctx context.Context) ([]byte, error)
}

// Receipts signs consent and erasure receipts and gives the keys that
// verify them (what receipts.Signer and erasure.ReceiptSigner declare).
type Receipts interface {
	// SignReceiptTx signs a receipt's claims with the receipt key that signs
	// now, reading it through tx when it is not at hand, under the JOSE
	// header typ, one of ReceiptTypes.
	SignReceiptTx(ctx context.Context, tx database.Tx, typ string, claims []byte) (string, error)
	// ReceiptKeys returns the public keys that may have signed a receipt
	// still within its retention.
	ReceiptKeys(ctx context.Context) (jose.JSONWebKeySet, error)
}

// Rotation makes new keys.
type Rotation interface {
	// RotateSigningKeys makes a new signing key of every role (ES256 for
	// access tokens, RS256 and ES256 for ID tokens, ES256 for receipts);
	// the previous ones are retired but stay published while what they
	// signed may be checked. It returns the new keys.
	RotateSigningKeys(ctx context.Context) ([]SigningKey, error)
	// Prepare makes sure a key of every role exists and that the
	// key-encryption key opens it, so that a wrong FLOWD_KEY_ENCRYPTION_KEY
	// stops serve at start-up instead of failing every token request.
	Prepare(ctx context.Context) error
}
