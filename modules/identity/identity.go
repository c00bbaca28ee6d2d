// Package identity knows who is calling: organizations, their API clients, the
// built-in OAuth 2.0 provider that issues their tokens, and the verification of
// bearer tokens (built-in or from an external issuer) into a Principal.
package identity

import (
	"context"
	"slices"
)

// Scopes an API client may hold.
const (
	ScopeFlowsRead   = "flows:read"
	ScopeFlowsWrite  = "flows:write" // create and cancel
	ScopeFlowsDelete = "flows:delete"
)

// AllScopes is what a client gets unless created with fewer.
var AllScopes = []string{ScopeFlowsRead, ScopeFlowsWrite, ScopeFlowsDelete}

// Principal is the verified caller of an API request. The organization always
// comes from here, never from a request body.
type Principal struct {
	OrganizationID string
	ClientID       string
	Scopes         []string
	Sandbox        bool
}

// HasScope reports whether the principal was granted scope.
func (p Principal) HasScope(scope string) bool { return slices.Contains(p.Scopes, scope) }

// Service is what the identity module offers the web layer and the CLI.
// Issue 3 fills it: organizations, API clients, the token endpoint, JWKS,
// discovery and bearer verification.
type Service interface {
	// VerifyAccessToken turns a bearer token (built-in or from a configured
	// external issuer) into a Principal. Any failure is an apperr
	// Unauthenticated error that does not say more than "invalid token".
	VerifyAccessToken(ctx context.Context, raw string) (Principal, error)
}
