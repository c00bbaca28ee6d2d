// Package identity knows who is calling. It is built of parts, each a
// package of its own with one reason to change:
//
//   - orgs: organizations, their API clients (credentials, keys, external
//     issuers' clients) and the clients' API rate limits;
//   - tokens: the OAuth token service (client authentication, DPoP, token
//     issue, refresh, revocation and introspection) and the verification of
//     bearer tokens, built-in or from an external issuer, into a Principal;
//   - keys: the signing keys of tokens and of consent receipts;
//   - staff: staff accounts and the sessions the server can end;
//   - audit: the audit log;
//   - login: the built-in provider's interactive sign-in.
//
// changes carries the announcements that keep the parts' caches current
// on every instance. This package holds only what the parts and their
// callers share: the Principal an API request runs as, the scopes a client
// may hold, the client authentication methods, a client's API rate limit,
// and the audit entry every change is recorded by.
package identity

import (
	"fmt"
	"slices"
	"time"

	"github.com/flowd/flowd/internal/apperr"
)

// Scopes an API client may hold.
const (
	ScopeFlowsRead   = "flows:read"
	ScopeFlowsWrite  = "flows:write" // create and cancel
	ScopeFlowsDelete = "flows:delete"
	// Consent definitions: read, and create, publish and retire.
	ScopeDefinitionsRead  = "definitions:read"
	ScopeDefinitionsWrite = "definitions:write"
	// ScopeWebhooksManage manages the organization's webhook endpoints.
	ScopeWebhooksManage = "webhooks:manage"
	// ScopeErasuresWrite erases people from the organization and reads its
	// erasures.
	ScopeErasuresWrite = "erasures:write"
	// ScopeResourcesManage registers the resources a data holder serves.
	ScopeResourcesManage = "resources:manage"
	// ScopeConsentsIntrospect lets a data holder introspect the consent
	// tokens addressed to its resources.
	ScopeConsentsIntrospect = "consents:introspect"
	// ScopeSSFManage manages a data holder's Shared Signals streams and
	// polls them.
	ScopeSSFManage = "ssf:manage"
)

// AllScopes is what a client gets unless created with fewer. A client keeps
// the scopes it was created with: scopes added later reach only new clients.
var AllScopes = []string{ScopeFlowsRead, ScopeFlowsWrite, ScopeFlowsDelete, ScopeDefinitionsRead, ScopeDefinitionsWrite, ScopeWebhooksManage, ScopeErasuresWrite,
	ScopeResourcesManage, ScopeConsentsIntrospect, ScopeSSFManage}

// OrderedScopes returns those of scopes that are flowd's, without
// duplicates, in AllScopes order.
func OrderedScopes(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range AllScopes {
		if slices.Contains(scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

// Lifetimes of the built-in provider's tokens: the token service issues
// them, and the signing keys stay trusted for as long after a rotation.
const (
	AccessTokenTTL  = 300 * time.Second
	RefreshTokenTTL = 1800 * time.Second
)

// Principal is the verified caller of an API request. The organization always
// comes from here, never from a request body.
type Principal struct {
	OrganizationID string
	ClientID       string
	Scopes         []string
	Sandbox        bool
	// External marks a token of the external issuer (FLOWD_OIDC_ISSUER):
	// its client id is counted apart from the built-in provider's clients.
	External bool
	// RateLimit is the client's own API rate limit, when it has one.
	RateLimit RateLimit
}

// HasScope reports whether the principal was granted scope.
func (p Principal) HasScope(scope string) bool { return slices.Contains(p.Scopes, scope) }

// RateLimit is an API client's own limit of API requests per minute. The
// zero value is no limit of its own: the deployment's default
// (FLOWD_API_RATE_LIMIT) applies.
type RateLimit struct {
	Own       bool
	PerMinute int // with Own: the client's limit; 0 is no limit at all
}

// MaxRateLimit is the highest limit per minute a client may be given.
const MaxRateLimit = 1_000_000_000

// Validate returns an apperr Invalid error naming perMinute when the limit
// is out of range.
func (r RateLimit) Validate() error {
	if r.Own && (r.PerMinute < 0 || r.PerMinute > MaxRateLimit) {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "perMinute", Message: fmt.Sprintf("must be from 0 (no limit) to %d", MaxRateLimit)}})
	}
	return nil
}

// Client authentication methods of the token endpoint (RFC 6749 2.3.1): how
// a client is registered to authenticate (orgs) and how it does (tokens).
const (
	AuthSecretBasic = "client_secret_basic"
	AuthSecretPost  = "client_secret_post"
	// AuthPrivateKeyJWT is a JWT signed with the client's key (RFC 7523 2.2).
	AuthPrivateKeyJWT = "private_key_jwt"
)
