package login

import (
	"context"

	"github.com/go-jose/go-jose/v4"
)

// Signer signs the provider's ID tokens. The keys part implements it with
// the same database-kept, rotating keys that sign access tokens, so one
// JWKS at /oauth/jwks verifies both.
type Signer interface {
	// SignIDToken returns the compact JWS of claims (a JSON-marshalable
	// value) signed with the active key of alg, one of
	// keys.IDTokenAlgorithms, with the key's kid in its header.
	SignIDToken(ctx context.Context, alg jose.SignatureAlgorithm, claims any) (string, error)
	// PublicJWKS returns the public keys that verify what SignIDToken
	// signed: the current ones and any still in use.
	PublicJWKS(ctx context.Context) (jose.JSONWebKeySet, error)
}
