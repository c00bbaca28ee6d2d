// Package login is the built-in OpenID provider's interactive side: the
// authorization code flow with PKCE for flowd's own relying parties (the
// console and the consent pages), sign-in with staff accounts (whose
// passwords the staff part checks) or the test eID, ID tokens, userinfo and
// RP-initiated logout. It signs through a Signer, which the keys part
// implements; it knows nothing of HTTP frameworks: the web layer binds,
// calls these methods and renders.
package login

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/staff"
)

// Method is how the people of a client sign in.
type Method string

// The sign-in methods of the built-in provider.
const (
	MethodStaff   Method = "staff"    // staff accounts: username and password
	MethodTestEID Method = "test-eid" // the test eID: type a national id
)

// TestEIDLevel is an assurance level the test eID offers, and the acr its
// ID tokens then carry. The claim flowd_test_identity tells a relying party
// that the identity is a test one, whatever its level.
type TestEIDLevel struct {
	Level string // low, substantial or high
	ACR   string
}

// Built-in client ids: flowd's own console and consent relying parties.
const (
	ConsoleClientID = "flowd-console"
	ConsentClientID = "flowd-consent"
)

// Client is a relying party registered with the built-in provider.
type Client struct {
	ID   string
	Name string
	// Secret authenticates the client at the token endpoint; empty makes it
	// a public client, which PKCE alone protects.
	Secret                 string
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	Method                 Method
	// IDTokenSignedResponseAlg is the algorithm of the client's ID tokens,
	// as the client metadata of OpenID Connect Dynamic Client Registration
	// names it: one of keys.IDTokenAlgorithms; empty means RS256, the
	// one every relying party accepts. The built-in clients keep RS256:
	// flowd's own relying party accepts either.
	IDTokenSignedResponseAlg jose.SignatureAlgorithm
}

// idTokenAlg is the algorithm that signs the client's ID tokens.
func (c Client) idTokenAlg() jose.SignatureAlgorithm {
	if c.IDTokenSignedResponseAlg == "" {
		return keys.IDTokenAlgorithms[0]
	}
	return c.IDTokenSignedResponseAlg
}

// BuiltInClientSecret derives a built-in client's secret from the session
// key, so that the provider and its relying parties in the same deployment
// agree without a setting of its own.
func BuiltInClientSecret(sessionKey []byte, clientID string) string {
	k, err := hkdf.Key(sha256.New, sessionKey, nil, "flowd built-in client secret "+clientID, 32)
	if err != nil {
		panic(err) // only for absurd lengths
	}
	return base64.RawURLEncoding.EncodeToString(k)
}

// BuiltInClients returns the console and consent clients of the deployment at base.
func BuiltInClients(base string, sessionKey []byte) []Client {
	return []Client{
		{
			ID: ConsoleClientID, Name: "flowd console", Method: MethodStaff,
			Secret:                 BuiltInClientSecret(sessionKey, ConsoleClientID),
			RedirectURIs:           []string{base + "/console/auth/callback"},
			PostLogoutRedirectURIs: []string{base + "/console/signed-out"},
		},
		{
			ID: ConsentClientID, Name: "flowd consent", Method: MethodTestEID,
			Secret:                 BuiltInClientSecret(sessionKey, ConsentClientID),
			RedirectURIs:           []string{base + "/consent/auth/callback"},
			PostLogoutRedirectURIs: []string{base + "/consent/signed-out"},
		},
	}
}

// Config is how the provider behaves.
type Config struct {
	Issuer  string
	Clients []Client
	// TestEID turns the test eID on (FLOWD_TEST_EID). TestEIDLevels are the
	// levels its tester may pick, weakest first (FLOWD_CONSENT_ACR_MAP).
	TestEID       bool
	TestEIDLevels []TestEIDLevel
	// Claim names of ID tokens: the national id of the test eID
	// (FLOWD_CONSENT_NATIONAL_ID_CLAIM), a staff member's organization and roles.
	NationalIDClaim string
	OrgClaim        string
	RolesClaim      string
	// DataKey encrypts the claims of codes and tokens at rest and keys the
	// test eID's pseudonymous subject.
	DataKey []byte
	// Lifetimes; zero means the default in parentheses.
	CodeTTL    time.Duration // 60s
	RequestTTL time.Duration // 15m: how long a sign-in form may stay open
	TokenTTL   time.Duration // 5m: ID and userinfo tokens
}

// StaffAccounts checks the passwords of staff accounts and finds them
// (part of staff.Accounts).
type StaffAccounts interface {
	AuthenticateStaff(ctx context.Context, username, password, address string) (staff.Account, error)
	StaffByID(ctx context.Context, id string) (staff.Account, error)
}

// TestEIDChoice is what the test eID's form offers: its levels, and the one
// preselected.
type TestEIDChoice struct {
	Levels   []TestEIDLevel
	Selected string
}

// OAuthError is an RFC 6749 error answer of the token or userinfo endpoint.
type OAuthError struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *OAuthError) Error() string { return e.Code + ": " + e.Description }

func invalidGrant(desc string) *OAuthError {
	return &OAuthError{Status: http.StatusBadRequest, Code: "invalid_grant", Description: desc}
}

// randomToken returns 256 random bits, base64url.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashOf(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// hasScope reports whether the space-separated scope holds s.
func hasScope(scope, s string) bool { return slices.Contains(strings.Fields(scope), s) }

func timeNow() time.Time { return time.Now() }

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
