// Package identitytest builds the identity module's parts for tests, on a
// test's database, wired as flowd serve wires them (cmd/flowd/internal/wiring).
package identitytest

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens"
)

// Config holds the settings of every part, as tests set them.
type Config struct {
	Issuer, Audience    string
	KeyEncryptionKey    []byte
	ReceiptKeyRetention time.Duration
	ExternalIssuer      string
	ExternalAudiences   []string
	OrgClaim            string
	DPoPNonceRequired   bool
	// HashParams are argon2id's costs of new client secrets; zero means
	// secrethash.Cheap, as tests want them.
	HashParams            secrethash.Params
	AccessTTL, RefreshTTL time.Duration
	APIRateLimit          int
	AddressFailureLimit   int
	FailureWindow         time.Duration
	Log                   *slog.Logger
	HTTPClient            *http.Client
	ClientJWKSHosts       []string
	JWKSHTTPClient        *http.Client
	JWKSAllowPrivate      bool
	Now                   func() time.Time
}

// The parts' services, by names Identity can embed them under.
type (
	tokenService = tokens.Service
	orgService   = orgs.Service
	keyService   = keys.Service
)

// Identity is one instance's identity parts. Their methods are promoted,
// so that a test acts on identity as an operator or a client would without
// naming the part; Identity satisfies every interface the parts offer.
type Identity struct {
	*tokenService
	*orgService
	*keyService
	*audit.Store
	Feed   *changes.Feed
	Limits *orgs.Limits
}

// AdmitAPIRequest is the instance's Limits'.
func (id *Identity) AdmitAPIRequest(p identity.Principal) orgs.RateLimitStatus {
	return id.Limits.AdmitAPIRequest(p)
}

// New wires the parts on pool; nothing runs until a test runs Feed.Run.
func New(t testing.TB, pool *pgxpool.Pool, cfg Config) *Identity {
	t.Helper()
	if cfg.HashParams == (secrethash.Params{}) {
		cfg.HashParams = secrethash.Cheap
	}
	feed := changes.NewFeed(pool, cfg.Log)
	signing, err := keys.New(pool, feed, keys.Config{KeyEncryptionKey: cfg.KeyEncryptionKey, AccessTokenTTL: cfg.AccessTTL,
		ReceiptKeyRetention: cfg.ReceiptKeyRetention, Log: cfg.Log, Now: cfg.Now})
	if err != nil {
		t.Fatal(err)
	}
	auditLog, err := audit.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	organizations, err := orgs.New(pool, feed, tokens.Grants{}, orgs.Config{KeyEncryptionKey: cfg.KeyEncryptionKey,
		HashParams: cfg.HashParams, ClientJWKSHosts: cfg.ClientJWKSHosts, Log: cfg.Log})
	if err != nil {
		t.Fatal(err)
	}
	tokenService, err := tokens.New(pool, feed, organizations, signing, auditLog, tokens.Config{
		Issuer: cfg.Issuer, Audience: cfg.Audience, KeyEncryptionKey: cfg.KeyEncryptionKey,
		ExternalIssuer: cfg.ExternalIssuer, ExternalAudiences: cfg.ExternalAudiences, OrgClaim: cfg.OrgClaim,
		DPoPNonceRequired: cfg.DPoPNonceRequired, AccessTTL: cfg.AccessTTL, RefreshTTL: cfg.RefreshTTL,
		AddressFailureLimit: cfg.AddressFailureLimit, FailureWindow: cfg.FailureWindow, Log: cfg.Log,
		HTTPClient: cfg.HTTPClient, ClientJWKSHosts: cfg.ClientJWKSHosts, JWKSHTTPClient: cfg.JWKSHTTPClient,
		JWKSAllowPrivate: cfg.JWKSAllowPrivate, Now: cfg.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Identity{tokenService: tokenService, orgService: organizations, keyService: signing, Store: auditLog, Feed: feed,
		Limits: orgs.NewLimits(pool, orgs.LimitsConfig{PerMinute: cfg.APIRateLimit, Log: cfg.Log, Now: cfg.Now})}
}
