package login

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/go-jose/go-jose/v4"
)

// Signer signs the provider's ID tokens. Issue 3's key store (keys kept in
// the database, encrypted, rotated, served at /oauth/jwks) implements it at
// merge; until then TemporaryMemorySigner stands in.
type Signer interface {
	// Sign returns the compact JWS of claims (a JSON-marshalable value),
	// with the signing key's kid in its header.
	Sign(ctx context.Context, claims any) (string, error)
	// PublicJWKS returns the public keys that verify what Sign signed:
	// the current one and any still in use.
	PublicJWKS(ctx context.Context) (jose.JSONWebKeySet, error)
}

// TemporaryMemorySigner is a Signer with one ECDSA P-256 key made at start-up
// and held in memory. It is TEMPORARY, for the login branch and its tests:
// instances do not share it and a restart invalidates its tokens. At merge
// issue 3's database-backed key store replaces it.
type TemporaryMemorySigner struct {
	key    *ecdsa.PrivateKey
	kid    string
	signer jose.Signer
}

// NewTemporaryMemorySigner makes a fresh key.
func NewTemporaryMemorySigner() (*TemporaryMemorySigner, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := (&jose.JSONWebKey{Key: &key.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	kid := base64.RawURLEncoding.EncodeToString(pub)[:16]
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	return &TemporaryMemorySigner{key: key, kid: kid, signer: signer}, nil
}

// Sign signs claims with ES256.
func (s *TemporaryMemorySigner) Sign(_ context.Context, claims any) (string, error) {
	b, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	jws, err := s.signer.Sign(b)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return jws.CompactSerialize()
}

// PublicJWKS returns the one public key.
func (s *TemporaryMemorySigner) PublicJWKS(context.Context) (jose.JSONWebKeySet, error) {
	return jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &s.key.PublicKey, KeyID: s.kid, Algorithm: string(jose.ES256), Use: "sig"}}}, nil
}
