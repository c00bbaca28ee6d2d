package login

import (
	"context"

	"github.com/go-jose/go-jose/v4"
)

// Signer signs the provider's ID tokens. The identity module implements it
// with the same database-kept, rotating keys that sign access tokens, so one
// JWKS at /oauth/jwks verifies both.
type Signer interface {
	// Sign returns the compact JWS of claims (a JSON-marshalable value),
	// with the signing key's kid in its header.
	Sign(ctx context.Context, claims any) (string, error)
	// PublicJWKS returns the public keys that verify what Sign signed:
	// the current one and any still in use.
	PublicJWKS(ctx context.Context) (jose.JSONWebKeySet, error)
}
