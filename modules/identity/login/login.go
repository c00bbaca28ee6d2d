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
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/login/internal/store"
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

// Provider is the built-in provider's interactive side.
type Provider struct {
	cfg       Config
	store     *store.Store
	staff     StaffAccounts
	signer    Signer
	aead      cipher.AEAD
	pseudoKey []byte
}

// New builds the provider; accounts checks the passwords of staff accounts.
func New(pool *pgxpool.Pool, signer Signer, accounts StaffAccounts, cfg Config) (*Provider, error) {
	if pool == nil || signer == nil || accounts == nil {
		return nil, errors.New("login: New needs a pool, a Signer and the staff accounts")
	}
	if len(cfg.DataKey) < 32 {
		return nil, errors.New("login: a 32-byte data key is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.CodeTTL, 60*time.Second)
	def(&cfg.RequestTTL, 15*time.Minute)
	def(&cfg.TokenTTL, 5*time.Minute)
	if cfg.NationalIDClaim == "" {
		cfg.NationalIDClaim = "pid"
	}
	if cfg.OrgClaim == "" {
		cfg.OrgClaim = "org_id"
	}
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = "roles"
	}
	for _, c := range cfg.Clients {
		if !slices.Contains(keys.IDTokenAlgorithms, c.idTokenAlg()) {
			return nil, fmt.Errorf("login: client %s: ID tokens cannot be signed with %q (RS256 or ES256)", c.ID, c.IDTokenSignedResponseAlg)
		}
	}
	encKey, err := hkdf.Key(sha256.New, cfg.DataKey, nil, "flowd login claims", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(encKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	pseudoKey, err := hkdf.Key(sha256.New, cfg.DataKey, nil, "flowd test eid subject", 32)
	if err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg, store: store.New(pool), staff: accounts, signer: signer, aead: aead, pseudoKey: pseudoKey}, nil
}

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// TestEIDEnabled reports whether the test eID is on.
func (p *Provider) TestEIDEnabled() bool { return p.cfg.TestEID }

// Client returns the registered client with id.
func (p *Provider) Client(id string) (Client, bool) {
	for _, c := range p.cfg.Clients {
		if c.ID == id {
			return c, true
		}
	}
	return Client{}, false
}

// Discovery returns the provider metadata of the interactive login. The web
// layer lays it over the identity module's document (issuer, jwks_uri,
// token_endpoint, the ID token algorithms), joining the lists both have.
func (p *Provider) Discovery() map[string]any {
	base := p.cfg.Issuer
	doc := map[string]any{
		"authorization_endpoint":                base + "/oauth/authorize",
		"userinfo_endpoint":                     base + "/oauth/userinfo",
		"end_session_endpoint":                  base + "/oauth/end_session",
		"response_types_supported":              []string{"code"},
		"response_modes_supported":              []string{"query"},
		"grant_types_supported":                 []string{"authorization_code", "client_credentials", "refresh_token"},
		"code_challenge_methods_supported":      []string{"S256"},
		"subject_types_supported":               []string{"public"},
		"scopes_supported":                      []string{"openid", "profile"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		// The claims of ID tokens and userinfo.
		"claims_supported": []string{"iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "acr", "azp",
			"preferred_username", "name", "sid", p.cfg.OrgClaim, p.cfg.RolesClaim, p.cfg.NationalIDClaim, "flowd_test_identity"},
		// Request objects are refused; absent, request_uri_parameter_supported
		// would mean true (OpenID Connect Discovery 1.0, section 3).
		"request_parameter_supported":     false,
		"request_uri_parameter_supported": false,
		// Every authorization response names the issuer (RFC 9207).
		"authorization_response_iss_parameter_supported": true,
		// The test eID's languages; the staff form is in English only.
		"ui_locales_supported": []string{"en", "nb"},
	}
	// Only the test eID issues an acr: its levels' values, weakest first.
	if p.cfg.TestEID {
		acrs := []string{}
		for _, l := range p.cfg.TestEIDLevels {
			acrs = append(acrs, l.ACR)
		}
		doc["acr_values_supported"] = acrs
	}
	return doc
}

// TestEIDChoice is what the test eID's form offers: its levels, and the one
// preselected.
type TestEIDChoice struct {
	Levels   []TestEIDLevel
	Selected string
}

// TestEIDLevelsFor returns the test eID's levels with the one preselected
// for a sign-in that asked for acrValues (space-separated): the first it
// asked for that the test eID offers, else substantial.
func (p *Provider) TestEIDLevelsFor(acrValues string) TestEIDChoice {
	c := TestEIDChoice{Levels: p.cfg.TestEIDLevels}
	for _, acr := range strings.Fields(acrValues) {
		for _, l := range c.Levels {
			if l.ACR == acr {
				c.Selected = l.Level
				return c
			}
		}
	}
	for _, l := range c.Levels {
		if l.Level == "substantial" || c.Selected == "" {
			c.Selected = l.Level
		}
	}
	return c
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

func (p *Provider) seal(plain []byte) ([]byte, error) {
	nonce := make([]byte, p.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return p.aead.Seal(nonce, nonce, plain, nil), nil
}

func (p *Provider) open(sealed []byte) ([]byte, error) {
	n := p.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("login: sealed data too short")
	}
	return p.aead.Open(nil, sealed[:n], sealed[n:], nil)
}

// pseudonym is the test eID's subject for a national id: stable, but not the
// national id itself, which appears only in its own claim.
func (p *Provider) pseudonym(nationalID string) string {
	m := hmac.New(sha256.New, p.pseudoKey)
	m.Write([]byte(nationalID))
	return "eid-" + hex.EncodeToString(m.Sum(nil))[:32]
}

// hasScope reports whether the space-separated scope holds s.
func hasScope(scope, s string) bool { return slices.Contains(strings.Fields(scope), s) }

func timeNow() time.Time { return time.Now() }
