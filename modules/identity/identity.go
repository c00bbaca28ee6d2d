// Package identity knows who is calling: organizations, their API clients, the
// built-in OAuth 2.0 provider that issues their tokens, and the verification of
// bearer tokens (built-in or from an external issuer) into a Principal.
package identity

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/fieldcheck"
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
)

// AllScopes is what a client gets unless created with fewer. A client keeps
// the scopes it was created with: scopes added later reach only new clients.
var AllScopes = []string{ScopeFlowsRead, ScopeFlowsWrite, ScopeFlowsDelete, ScopeDefinitionsRead, ScopeDefinitionsWrite, ScopeWebhooksManage}

// Lifetimes of the built-in provider's tokens, as CONTRACT.md section 2 fixes them.
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

// Organization is a customer of flowd: a bank or lender that asks individuals
// for consent. Its settings shape the flows it creates.
type Organization struct {
	ID                 string
	Name               string
	OrganizationNumber string // empty when not given
	// ReferencePrefix starts the reference id of every flow, e.g. "DEMO".
	ReferencePrefix string
	// RedirectOrigins are the origins a flow's redirectUrl may point to; empty allows any.
	RedirectOrigins []string
	CreatedAt       time.Time
}

// NewOrganization is the input of CreateOrganization.
type NewOrganization struct {
	Name               string
	OrganizationNumber string
	ReferencePrefix    string // derived from Name when empty
	RedirectOrigins    []string
}

var prefixPattern = regexp.MustCompile(`^[A-Z0-9]{2,8}$`)

// Validate checks the input and fills in the derived reference prefix; it
// returns an apperr Invalid error naming every bad field.
func (n *NewOrganization) Validate() error {
	var f apperr.Fields
	n.Name = strings.TrimSpace(n.Name)
	n.OrganizationNumber = strings.TrimSpace(n.OrganizationNumber)
	n.ReferencePrefix = strings.ToUpper(strings.TrimSpace(n.ReferencePrefix))
	if n.Name == "" {
		f.Add("name", "is required")
	} else if msg := fieldcheck.Text(n.Name, 200); msg != "" {
		f.Add("name", "%s", msg)
	}
	checkOrganizationNumber(&f, n.OrganizationNumber)
	if n.ReferencePrefix == "" && n.Name != "" {
		n.ReferencePrefix = DerivePrefix(n.Name)
	}
	if !prefixPattern.MatchString(n.ReferencePrefix) {
		f.Add("referencePrefix", "must be 2 to 8 letters A-Z or digits")
	}
	for i, o := range n.RedirectOrigins {
		origin, err := normalizeOrigin(o)
		if err != nil {
			f.Add("redirectOrigins", "%q: %v", o, err)
			continue
		}
		n.RedirectOrigins[i] = origin
	}
	return f.Err()
}

// DerivePrefix makes a reference prefix from an organization's name: the
// upper-case letters and digits of its initials when it has several words,
// else of the name itself; 2 to 8 characters, "ORG" padding when too short.
func DerivePrefix(name string) string {
	keep := func(s string) string {
		var b strings.Builder
		for _, r := range strings.ToUpper(s) {
			if t, ok := transliterations[r]; ok {
				b.WriteString(t)
			} else if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	all := keep(name)
	words := strings.Fields(name)
	p := all
	if len(words) > 1 {
		var initials strings.Builder
		for _, w := range words {
			initials.WriteString(firstRune(keep(w)))
		}
		if initials.Len() >= 2 {
			p = initials.String()
		}
	}
	if len(p) > 8 {
		p = p[:8]
	}
	if len(p) < 2 {
		p = (p + "ORG")[:3]
	}
	return p
}

// transliterations spell the letters of Nordic and other European names in A-Z.
var transliterations = map[rune]string{
	'Æ': "AE", 'Ø': "O", 'Å': "A", 'Ä': "A", 'Ö': "O", 'Ü': "U", 'ß': "SS", 'É': "E", 'È': "E", 'Ê': "E",
	'Á': "A", 'À': "A", 'Í': "I", 'Ó': "O", 'Ú': "U", 'Ñ': "N", 'Ç': "C", 'Ð': "D", 'Þ': "TH",
}

func firstRune(s string) string {
	if s == "" {
		return ""
	}
	return s[:1]
}

// OrganizationUpdate is the input of UpdateOrganization: the settings staff
// may change in the console. The name and id are not among them.
type OrganizationUpdate struct {
	ID                 string
	ReferencePrefix    string
	OrganizationNumber string
	// RedirectOrigins are origins such as https://bank.example; empty allows any.
	RedirectOrigins []string
}

// MaxRedirectOrigins bounds an organization's redirect allow-list.
const MaxRedirectOrigins = 50

// Validate normalizes the input and returns an apperr Invalid error naming
// every bad field (referencePrefix, organizationNumber, redirectOrigins).
// An origin is scheme and host (and port) only: a path, query or user info
// would suggest a check the allow-list does not make.
func (u *OrganizationUpdate) Validate() error {
	var f apperr.Fields
	u.ReferencePrefix = strings.ToUpper(strings.TrimSpace(u.ReferencePrefix))
	u.OrganizationNumber = strings.TrimSpace(u.OrganizationNumber)
	if !prefixPattern.MatchString(u.ReferencePrefix) {
		f.Add("referencePrefix", "must be 2 to 8 letters A-Z or digits")
	}
	checkOrganizationNumber(&f, u.OrganizationNumber)
	var origins []string
	for _, raw := range u.RedirectOrigins {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		parsed, err := url.Parse(raw)
		if err == nil && (parsed.User != nil || strings.Trim(parsed.Path, "/") != "" || parsed.RawQuery != "" || parsed.Fragment != "") {
			f.Add("redirectOrigins", "%q: must be an origin such as https://bank.example, without a path", raw)
			continue
		}
		origin, err := normalizeOrigin(raw)
		if err != nil {
			f.Add("redirectOrigins", "%q: %v", raw, err)
			continue
		}
		if !slices.Contains(origins, origin) {
			origins = append(origins, origin)
		}
	}
	if len(origins) > MaxRedirectOrigins {
		f.Add("redirectOrigins", "must list at most %d origins", MaxRedirectOrigins)
	}
	u.RedirectOrigins = origins
	return f.Err()
}

// checkOrganizationNumber holds an organization number to at most 64 bytes
// of text without control or formatting characters.
func checkOrganizationNumber(f *apperr.Fields, number string) {
	if len(number) > 64 {
		f.Add("organizationNumber", "must be at most 64 characters")
	} else if msg := fieldcheck.Text(number, 64); msg != "" {
		f.Add("organizationNumber", "%s", msg)
	}
}

// normalizeOrigin accepts an absolute http(s) URL and returns its origin.
func normalizeOrigin(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.ContainsFunc(s, fieldcheck.IsControlOrFormat) {
		return "", errors.New(fieldcheck.ControlOrFormatMessage)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("must be an absolute http(s) URL")
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

// Client is an API client of an organization: the holder of a client id and
// a secret, or public keys for private_key_jwt, or both, that obtains tokens
// from the built-in provider.
type Client struct {
	ID             string
	OrganizationID string
	Name           string
	HasSecret      bool       // false for an assertion-only client
	Keys           ClientKeys // its public keys; zero when it has none
	Scopes         []string
	Sandbox        bool
	CreatedAt      time.Time
	LastUsedAt     *time.Time
	RevokedAt      *time.Time
	// DPoPBound requires DPoP proofs at the token endpoint (RFC 9449 5.2's
	// dpop_bound_access_tokens), so that every token it gets is DPoP-bound.
	DPoPBound bool
	// RateLimit is its own API rate limit, if it has one.
	RateLimit RateLimit
}

// Revoked reports whether the client may no longer obtain or use tokens.
func (c Client) Revoked() bool { return c.RevokedAt != nil }

// NewClient is the input of CreateClient.
type NewClient struct {
	OrganizationID string
	Name           string   // "API client" when empty
	Scopes         []string // AllScopes when empty
	Sandbox        bool
	// Keys, when given, let the client authenticate with private_key_jwt;
	// it then gets no secret unless AlsoSecret is set (to migrate).
	Keys       ClientKeys
	AlsoSecret bool
	DPoPBound  bool // see Client.DPoPBound
}

// Validate checks the input and fills in defaults; it returns an apperr
// Invalid error naming every bad field.
func (n *NewClient) Validate() error {
	var f apperr.Fields
	n.Name = strings.TrimSpace(n.Name)
	if n.Name == "" {
		n.Name = "API client"
	}
	if msg := fieldcheck.Text(n.Name, 200); msg != "" {
		f.Add("name", "%s", msg)
	}
	if n.OrganizationID == "" {
		f.Add("organizationId", "is required")
	}
	scopes, err := normalizeScopes(n.Scopes)
	if err != nil {
		f.Add("scopes", "%v", err)
	}
	n.Scopes = scopes
	return f.Err()
}

// normalizeScopes checks scopes against AllScopes and returns them without
// duplicates in AllScopes order; no scope at all means all of them.
func normalizeScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return slices.Clone(AllScopes), nil
	}
	var out []string
	for _, s := range AllScopes {
		if slices.Contains(scopes, s) {
			out = append(out, s)
		}
	}
	for _, s := range scopes {
		if !slices.Contains(AllScopes, s) {
			return nil, fmt.Errorf("unknown scope %q (known: %s)", s, strings.Join(AllScopes, " "))
		}
	}
	return out, nil
}

// ClientCredentials is a client with its secret, which is shown once: only a
// slow hash of it is kept.
type ClientCredentials struct {
	Client
	Secret string
}

// ExternalClient maps a client of an external issuer to an organization, for
// tokens that carry no organization claim. Its client id also counts as an
// accepted audience of that issuer's tokens.
type ExternalClient struct {
	Issuer         string
	ClientID       string
	OrganizationID string
	Scopes         []string // granted when the token carries none of flowd's scopes
	Sandbox        bool
	CreatedAt      time.Time
	RateLimit      RateLimit // its own API rate limit, if it has one
}

// Validate checks the input and fills in defaults.
func (x *ExternalClient) Validate() error {
	var f apperr.Fields
	x.Issuer = strings.TrimSpace(x.Issuer)
	x.ClientID = strings.TrimSpace(x.ClientID)
	if u, err := url.Parse(x.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		f.Add("issuer", "must be the issuer's absolute URL")
	}
	if x.ClientID == "" || len(x.ClientID) > 255 || strings.ContainsFunc(x.ClientID, fieldcheck.IsControlOrFormat) {
		f.Add("clientId", "is required, at most 255 characters without control or formatting characters")
	}
	if x.OrganizationID == "" {
		f.Add("organizationId", "is required")
	}
	scopes, err := normalizeScopes(x.Scopes)
	if err != nil {
		f.Add("scopes", "%v", err)
	}
	x.Scopes = scopes
	return f.Err()
}

// Client authentication methods of the token endpoint (RFC 6749 2.3.1).
const (
	AuthSecretBasic = "client_secret_basic"
	AuthSecretPost  = "client_secret_post"
	// AuthPrivateKeyJWT is a JWT signed with the client's key (RFC 7523 2.2).
	AuthPrivateKeyJWT = "private_key_jwt"
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
	AuthMethod   string // AuthSecretBasic, AuthSecretPost or AuthPrivateKeyJWT
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
}

// Token is the token endpoint's answer.
type Token struct {
	AccessToken      string
	ExpiresIn        int
	RefreshToken     string
	RefreshExpiresIn int
	TokenType        string
	Scope            string
}

// RFC 6749 5.2 error codes of the token endpoint.
const (
	ErrCodeInvalidRequest       = "invalid_request"
	ErrCodeInvalidClient        = "invalid_client"
	ErrCodeInvalidGrant         = "invalid_grant"
	ErrCodeUnauthorizedClient   = "unauthorized_client"
	ErrCodeUnsupportedGrantType = "unsupported_grant_type"
	ErrCodeInvalidScope         = "invalid_scope"
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

// Errors of the identity module, apperr values so that the web layer maps them.
var (
	ErrOrganizationNotFound = apperr.New(apperr.NotFound, "No such organization.")
	ErrClientNotFound       = apperr.New(apperr.NotFound, "No such API client.")
	ErrInvalidToken         = apperr.New(apperr.Unauthenticated, "The access token is invalid or expired.")
)

// Organizations manages organizations.
type Organizations interface {
	// CreateOrganization validates in (apperr Invalid) and stores it.
	CreateOrganization(ctx context.Context, in NewOrganization) (Organization, error)
	// CreateOrganizationTx is CreateOrganization inside the caller's
	// transaction, so that other modules set up the organization in the same
	// unit (the webhooks module's signing secret).
	CreateOrganizationTx(ctx context.Context, tx database.Tx, in NewOrganization) (Organization, error)
	// Organization returns one organization with its settings. ErrOrganizationNotFound.
	Organization(ctx context.Context, id string) (Organization, error)
	// ListOrganizations returns every organization, oldest first.
	ListOrganizations(ctx context.Context) ([]Organization, error)
	// UpdateOrganization validates u (apperr Invalid) and replaces the
	// organization's settings; new flows take them at once. before runs in
	// the update's transaction with the settings it replaced and the new
	// ones (see database.BeforeCommit); its error undoes the update and is
	// returned. ErrOrganizationNotFound.
	UpdateOrganization(ctx context.Context, u OrganizationUpdate, before ...database.BeforeCommit[OrganizationChange]) (Organization, error)
}

// OrganizationChange is an organization as an update found it and as it
// left it, both read in the update's transaction: an audit entry names
// what changed even when two admins save at once.
type OrganizationChange struct {
	Before, After Organization
}

// ClientChange is a client as a change found it and as it left it, both
// read in the change's transaction.
type ClientChange struct {
	Before, After Client
}

// Clients manages API clients and external client mappings.
type Clients interface {
	// CreateClient makes a client and its secret, shown only now (no
	// secret for a client with Keys, unless AlsoSecret). before
	// runs in the create's transaction (see database.BeforeCommit); its error
	// undoes the create and is returned. ErrOrganizationNotFound, apperr Invalid.
	CreateClient(ctx context.Context, in NewClient, before ...database.BeforeCommit[ClientCredentials]) (ClientCredentials, error)
	// Client returns one client. ErrClientNotFound.
	Client(ctx context.Context, clientID string) (Client, error)
	// ListClients returns an organization's clients, oldest first.
	ListClients(ctx context.Context, organizationID string) ([]Client, error)
	// RotateClientSecret gives the client a new secret; the old one stops
	// working at once, and so do the client's refresh tokens. before runs in
	// the rotation's transaction (see database.BeforeCommit); its error keeps
	// the old secret and is returned.
	// ErrClientNotFound (also for another organization's or a revoked
	// client), ErrNoClientSecret for an assertion-only client.
	RotateClientSecret(ctx context.Context, organizationID, clientID string, before ...database.BeforeCommit[ClientCredentials]) (ClientCredentials, error)
	// ReplaceClientKeys replaces the client's public keys (private_key_jwt)
	// by keys, which are validated (apperr Invalid); its secret, if any,
	// stays. before runs in the replacement's transaction (see
	// database.BeforeCommit); its error keeps the old keys and is returned.
	// ErrClientNotFound (also for another organization's or a revoked client).
	ReplaceClientKeys(ctx context.Context, organizationID, clientID string, keys ClientKeys, before ...database.BeforeCommit[Client]) (Client, error)
	// RevokeClient stops the client: it can obtain no token, and the tokens it
	// holds stop working at once on every instance. before runs in the
	// revocation's transaction (see database.BeforeCommit); its error leaves
	// the client working and is returned. ErrClientNotFound.
	RevokeClient(ctx context.Context, organizationID, clientID string, before ...database.BeforeCommit[Client]) (Client, error)
	// SetClientDPoP turns DPoP-bound access tokens on or off for a client
	// (Client.DPoPBound); tokens it already holds are unchanged. before runs
	// in the change's transaction, only when the setting changes, with the
	// client as it was and as it is now; its error undoes the change and is
	// returned. ErrClientNotFound
	// (also for another organization's or a revoked client).
	SetClientDPoP(ctx context.Context, organizationID, clientID string, on bool, before ...database.BeforeCommit[ClientChange]) (Client, error)
	// SetClientRateLimit gives a client its own API rate limit, or returns
	// it to the default with a zero RateLimit; every instance applies it
	// within moments. before runs in the change's transaction, only when
	// the limit changes, with the client as it was and as it is now; its
	// error undoes the change and is returned. apperr Invalid,
	// ErrClientNotFound (also for another organization's or a revoked client).
	SetClientRateLimit(ctx context.Context, organizationID, clientID string, limit RateLimit, before ...database.BeforeCommit[ClientChange]) (Client, error)
	// SetExternalClientRateLimit does the same for a mapped client of an
	// external issuer; before runs in the change's transaction. apperr
	// Invalid, ErrClientNotFound when the client is not mapped.
	SetExternalClientRateLimit(ctx context.Context, issuer, clientID string, limit RateLimit, before ...database.BeforeCommit[ExternalClient]) (ExternalClient, error)
	// MapExternalClient maps an external issuer's client id to an
	// organization, replacing an earlier mapping. ErrOrganizationNotFound, apperr Invalid.
	MapExternalClient(ctx context.Context, in ExternalClient) (ExternalClient, error)
	// ListExternalClients returns an organization's mapped external clients.
	ListExternalClients(ctx context.Context, organizationID string) ([]ExternalClient, error)
}

// Provider is the built-in OAuth 2.0 provider.
type Provider interface {
	// Token answers the token endpoint. Failures are *TokenError values;
	// anything else is an internal (or unavailable-database) error.
	Token(ctx context.Context, req TokenRequest) (Token, error)
	// JWKS returns the JSON Web Key Set of the keys that sign, or signed
	// still-valid, access tokens.
	JWKS(ctx context.Context) ([]byte, error)
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
	// RotateSigningKeys makes a new signing key of every algorithm (ES256
	// for access tokens, RS256 and ES256 for ID tokens); the previous ones
	// are retired but stay in the JWKS until the tokens they signed have
	// expired. It returns the new keys.
	RotateSigningKeys(ctx context.Context) ([]SigningKey, error)
}

// SigningKey names a signing key of the built-in provider.
type SigningKey struct {
	ID        string // the kid of its tokens and of its JWKS entry
	Algorithm string // its JOSE algorithm: ES256 or RS256
	Receipts  bool   // it signs consent receipts, not tokens
}

// Service is what the identity module offers the web layer, the CLI and the
// other modules.
type Service interface {
	Organizations
	Clients
	Provider
	Audit
	DPoP
	// VerifyAccessToken turns a bearer token (built-in or from a configured
	// external issuer) into a Principal. Any failure is an apperr
	// Unauthenticated error that does not say more than "invalid token".
	VerifyAccessToken(ctx context.Context, raw string) (Principal, error)
}
