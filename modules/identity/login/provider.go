package login

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/login/internal/store"
)

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
// layer lays it over the token service's document (issuer, jwks_uri,
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
