// Package tokens is identity's part that is the built-in OAuth 2.0
// provider's token service: it authenticates API clients (client secrets,
// checked by their MACs or argon2id, and private_key_jwt), checks DPoP
// proofs, issues, refreshes, revokes and introspects tokens, and verifies
// the bearer tokens of API requests, built-in or from an external issuer,
// into an identity.Principal. Clients, keys and the audit log are other
// parts', reached through the interfaces declared here.
package tokens

import (
	"context"
	"crypto/ecdsa"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens/internal/dpopproof"
)

// Grant types of the token endpoint.
const (
	GrantClientCredentials = "client_credentials"
	GrantRefreshToken      = "refresh_token"
)

// ClientAuth is how an API client authenticates at the token, revocation
// and introspection endpoints: one check, one rate limit for all three.
type ClientAuth struct {
	ClientID     string
	ClientSecret string
	AuthMethod   string // identity.AuthSecretBasic, AuthSecretPost or AuthPrivateKeyJWT
	RemoteAddr   string // the caller's address, for rate limiting
	// ClientAssertionType and ClientAssertion are private_key_jwt's
	// parameters; ClientID may then be empty (the assertion's sub).
	ClientAssertionType string
	ClientAssertion     string
}

// TokenRequest is a parsed request to the token endpoint.
type TokenRequest struct {
	ClientAuth
	GrantType    string
	RefreshToken string
	Scope        string // space-separated; empty asks for everything allowed
	DPoP         DPoPRequest
	// AuthorizationDetails (RFC 9396, JSON) and Resource (RFC 8707) ask
	// for a consent token; see ConsentTokens.
	AuthorizationDetails string
	Resource             string
}

// Token type hints of the revocation and introspection endpoints (RFC 7009
// 2.1). flowd tells its tokens apart by their form, so a hint only has to be
// one of these or absent; an unknown hint is ignored, as RFC 7009 allows.
const (
	TokenTypeAccess  = "access_token"
	TokenTypeRefresh = "refresh_token"
)

// ClientTokenRequest is a client's request about one of its own tokens, to
// the revocation (RFC 7009) or the introspection (RFC 7662) endpoint.
type ClientTokenRequest struct {
	ClientAuth
	Token         string
	TokenTypeHint string
}

// Introspection is the introspection endpoint's answer (RFC 7662 2.2). An
// inactive token has only Active false: nothing else is told about it.
type Introspection struct {
	Active         bool
	Scope          string // space-separated
	ClientID       string
	TokenType      string // "Bearer" for access tokens, TokenTypeRefresh for refresh tokens
	Expiry         time.Time
	IssuedAt       time.Time
	NotBefore      time.Time // zero for refresh tokens
	Subject        string
	Audience       string // empty for refresh tokens
	Issuer         string
	JWTID          string // empty for refresh tokens
	OrganizationID string
	DPoPJKT        string // cnf.jkt of a DPoP-bound access token (RFC 9449 6.2)
	// AuthorizationDetails are a consent token's (RFC 9396 9.2), a JSON
	// array; empty for other tokens.
	AuthorizationDetails string
	// Requester is the authenticated client that asked, active or not: the
	// audience of a signed answer (RFC 9701).
	Requester string
}

// Token is the token endpoint's answer.
type Token struct {
	AccessToken      string
	ExpiresIn        int
	RefreshToken     string
	RefreshExpiresIn int
	TokenType        string
	Scope            string
	// AuthorizationDetails are a consent token's (RFC 9396 7), a JSON
	// array; a consent token has no refresh token and no scope.
	AuthorizationDetails string
}

// RFC 6749 5.2 error codes of the token endpoint.
const (
	ErrCodeInvalidRequest       = "invalid_request"
	ErrCodeInvalidClient        = "invalid_client"
	ErrCodeInvalidGrant         = "invalid_grant"
	ErrCodeUnauthorizedClient   = "unauthorized_client"
	ErrCodeUnsupportedGrantType = "unsupported_grant_type"
	ErrCodeInvalidScope         = "invalid_scope"
	// ErrCodeInvalidAuthorizationDetails refuses a consent token (RFC 9396
	// 5); ErrCodeInvalidTarget a resource without one (RFC 8707 2).
	ErrCodeInvalidAuthorizationDetails = "invalid_authorization_details"
	ErrCodeInvalidTarget               = "invalid_target"
	// ErrCodeSlowDown is not an RFC 6749 code; the token endpoint answers it with 429.
	ErrCodeSlowDown = "slow_down"
)

// TokenError is an RFC 6749 5.2 error of the token endpoint. Its
// Description is safe to show the caller.
type TokenError struct {
	Code        string
	Description string
	// AuthMethod is how the client tried to authenticate, so that an
	// invalid_client answer to Basic can carry WWW-Authenticate.
	AuthMethod string
	// RetryAfter is set on ErrCodeSlowDown.
	RetryAfter time.Duration
}

func (e *TokenError) Error() string { return e.Code + ": " + e.Description }

// ErrInvalidToken is the one error a refused access token gets.
var ErrInvalidToken = apperr.New(apperr.Unauthenticated, "The access token is invalid or expired.")

// The acceptance window of a DPoP proof's iat (RFC 9449 11.1).
const (
	DPoPProofMaxAge    = dpopproof.MaxAge
	DPoPProofMaxFuture = dpopproof.MaxFuture
)

// DPoPAlgorithms are the signature algorithms accepted for DPoP proofs:
// asymmetric only, so "none" and HMAC are refused before any key is used.
var DPoPAlgorithms = dpopproof.Algorithms

// DPoPAlgorithmNames are DPoPAlgorithms by name, as discovery and the
// WWW-Authenticate challenge list them.
var DPoPAlgorithmNames = algorithmNames(DPoPAlgorithms)

// Error codes of DPoP (RFC 9449 5 and 7.1), at the token endpoint and in
// resource servers' challenges.
const (
	ErrCodeInvalidDPoPProof = dpopproof.CodeInvalidProof
	ErrCodeUseDPoPNonce     = dpopproof.CodeUseNonce
)

// DPoPRequest is what a request offers for DPoP: its DPoP header values,
// its method and its path.
type DPoPRequest = dpopproof.Request

// NewDPoPRequest makes the DPoPRequest of a request's DPoP header values.
func NewDPoPRequest(values []string, method, path string) DPoPRequest {
	return dpopproof.NewRequest(values, method, path)
}

// DPoPError is why a DPoP proof was refused: ErrCodeInvalidDPoPProof or
// ErrCodeUseDPoPNonce, with a Description safe to show the caller. The
// token endpoint answers it as a TokenError; a resource request gets an
// apperr Unauthenticated error that wraps it.
type DPoPError = dpopproof.Error

// ClientAssertionType is the client_assertion_type of private_key_jwt
// (RFC 7523 2.2).
const ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// MaxAssertionLifetime bounds a client assertion's exp - iat (or exp - now
// without iat), so that its used jti need be kept only briefly (RFC 7523 3,
// OIDC Core 9).
const MaxAssertionLifetime = 5 * time.Minute

// Provider is the built-in OAuth 2.0 provider's token service.
type Provider interface {
	// Token answers the token endpoint. Failures are *TokenError values;
	// anything else is an internal (or unavailable-database) error.
	Token(ctx context.Context, req TokenRequest) (Token, error)
	// Discovery returns the OpenID Provider metadata document.
	Discovery() map[string]any
	// Revoke answers the revocation endpoint (RFC 7009): a refresh token
	// revokes its whole family, an access token is refused by every instance
	// until it expires. A token that is unknown, invalid, expired, already
	// revoked or another client's changes nothing and is no error. Failures
	// are *TokenError values (invalid_request, invalid_client, slow_down).
	Revoke(ctx context.Context, req ClientTokenRequest) error
	// Introspect answers the introspection endpoint (RFC 7662): the token's
	// claims when it is active and the calling client's own, else only
	// Active false. Failures are as Revoke's.
	Introspect(ctx context.Context, req ClientTokenRequest) (Introspection, error)
	// SignIntrospection signs an introspection answer, the JSON of RFC 7662
	// 2.2, for the client clientID as RFC 9701 5 says: a JWT of typ
	// token-introspection+jwt with iss, aud (the client), iat and the
	// answer as its token_introspection claim.
	SignIntrospection(ctx context.Context, clientID string, answer []byte) (string, error)
}

// Verifier turns the access token of an API request into a Principal.
type Verifier interface {
	// VerifyAccessToken turns a bearer token (built-in or from a configured
	// external issuer) into a Principal. Any failure is an apperr
	// Unauthenticated error that does not say more than "invalid token".
	VerifyAccessToken(ctx context.Context, raw string) (identity.Principal, error)
	// VerifyDPoPAccessToken turns an access token sent with the DPoP
	// scheme (RFC 9449 7) into a Principal: the token must be DPoP-bound
	// (cnf.jkt), and the request's proof valid, signed by that key, for
	// this request and this token (ath), and not seen before by any
	// instance. Failures are apperr Unauthenticated errors; a proof's
	// failure wraps a *DPoPError.
	VerifyDPoPAccessToken(ctx context.Context, raw string, req DPoPRequest) (identity.Principal, error)
	// DPoPNonce returns the nonce proofs must carry now, empty when
	// FLOWD_DPOP_NONCE is off.
	DPoPNonce() string
}

// Clients is what the token service needs of organizations and clients
// (orgs.ClientRecords offers it).
type Clients interface {
	StoredClient(ctx context.Context, clientID string) (orgs.StoredClient, error)
	ClientState(ctx context.Context, clientID string) (orgs.ClientState, bool, error)
	ExternalClient(ctx context.Context, issuer, clientID string) (orgs.ExternalClient, bool, error)
	OrganizationExists(ctx context.Context, id string) (bool, error)
	SetClientSecretMAC(ctx context.Context, clientID, hash string, mac []byte) error
	TouchClient(ctx context.Context, clientID string) error
}

// Keys signs access tokens and finds the keys that verify them (part of
// keys.Tokens).
type Keys interface {
	SignAccessToken(ctx context.Context, claims []byte) (string, error)
	SignTypedToken(ctx context.Context, typ string, claims []byte) (string, error)
	AccessTokenKey(ctx context.Context, kid string) (*ecdsa.PublicKey, error)
}

// AuditLog records a client's revocations (part of audit.Log).
type AuditLog interface {
	RecordAuditTx(ctx context.Context, tx database.Tx, e identity.AuditEntry) error
}
