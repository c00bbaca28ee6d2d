package tokens

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/cache"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/windowlimit"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/internal/secret"
	"github.com/flowd/flowd/modules/identity/tokens/internal/clientjwks"
	"github.com/flowd/flowd/modules/identity/tokens/internal/dpopproof"
	"github.com/flowd/flowd/modules/identity/tokens/internal/revoked"
	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

// Config is what the token service needs to know; the wiring (cmd/flowd) fills it
// from internal/config.
type Config struct {
	// Issuer is the built-in provider's issuer: FLOWD_BASE_URL.
	Issuer string
	// Audience is the aud of built-in access tokens: FLOWD_AUDIENCE.
	Audience string
	// KeyEncryptionKey keys the MACs of client secrets and the DPoP nonces.
	KeyEncryptionKey []byte

	// ExternalIssuer, when set, is an OIDC issuer whose access tokens flowd accepts.
	ExternalIssuer string
	// ExternalAudiences are the accepted aud values of the external issuer's
	// tokens; empty means Audience. A mapped client's own id is accepted too.
	ExternalAudiences []string
	// OrgClaim names the claim that carries the organization id in external tokens.
	OrgClaim string

	// DPoPNonceRequired makes DPoP proofs carry a server nonce (RFC 9449 8
	// and 9; FLOWD_DPOP_NONCE=required).
	DPoPNonceRequired bool

	// AccessTTL and RefreshTTL default to identity.AccessTokenTTL and
	// identity.RefreshTokenTTL.
	AccessTTL, RefreshTTL time.Duration

	// AddressFailureLimit is how many costly client authentications (argon2id
	// of a secret without a MAC, a fetch of a jwks_uri) of one client one
	// address may fail within FailureWindow before further costly ones of
	// that client from there answer 429; zero means 30 and a minute.
	AddressFailureLimit int
	FailureWindow       time.Duration

	Log *slog.Logger
	// HTTPClient fetches the external issuer's discovery document and keys.
	HTTPClient *http.Client
	// ClientJWKSHosts are the hosts a client's jwks_uri may be on
	// (FLOWD_CLIENT_JWKS_HOSTS); empty allows no jwks_uri.
	ClientJWKSHosts []string
	// JWKSHTTPClient fetches clients' jwks_uri; each fetch has its own
	// 5-second limit. A plain client when nil. Whatever it is, its
	// connections are made by the address guard of webhook deliveries
	// (internal/netguard), which refuses non-public addresses unless
	// JWKSAllowPrivate is set (FLOWD_WEBHOOK_ALLOW_PRIVATE).
	JWKSHTTPClient   *http.Client
	JWKSAllowPrivate bool
	// JWKSTransport, when set, wraps the transport of jwks_uri fetches
	// (tracing's client spans).
	JWKSTransport func(http.RoundTripper) http.RoundTripper
	// Registry, when set, receives the count of access tokens refused by
	// reason (flowd_token_refusals_total).
	Registry prometheus.Registerer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Service is the token service (Provider, Verifier).
type Service struct {
	pool    *pgxpool.Pool
	feed    *changes.Feed
	clients Clients
	keys    Keys
	audit   AuditLog
	cfg     Config
	log     *slog.Logger
	now     func() time.Time

	tokens  *cache.Map[[32]byte, verifiedToken] // verified tokens, by SHA-256
	revoked *revoked.Set
	jwks    clientjwks.Cache
	macs    secret.MACs
	limiter *windowlimit.Limiter
	hashing chan struct{} // bounds concurrent argon2id work

	dpop *dpopproof.Checker
	// dpopSeen remembers the DPoP proofs (key thumbprint and jti) this
	// instance accepted or refused as replays, until they leave the
	// acceptance window: a replay sent to the same instance is refused
	// without a database round trip. It only ever refuses; dpop_proofs
	// decides what is accepted.
	dpopSeen *cache.Map[string, struct{}]

	builtin  *builtinVerifier
	external *externalVerifier
	// refusals counts the access tokens refused, by reason.
	refusals *prometheus.CounterVec
}

var (
	_ Provider = (*Service)(nil)
	_ Verifier = (*Service)(nil)
)

// New returns the token service on pool: clients authenticate against
// clients, tokens are signed by keys, and revocations are audited in
// audit. feed brings other instances' revocations. It does not touch the
// database.
func New(pool *pgxpool.Pool, feed *changes.Feed, clients Clients, keys Keys, audit AuditLog, cfg Config) (*Service, error) {
	if pool == nil || feed == nil || clients == nil || keys == nil || audit == nil {
		return nil, errors.New("tokens: New needs a pool, the change feed, Clients, Keys and an AuditLog")
	}
	if cfg.AccessTTL == 0 {
		cfg.AccessTTL = identity.AccessTokenTTL
	}
	if cfg.RefreshTTL == 0 {
		cfg.RefreshTTL = identity.RefreshTokenTTL
	}
	if cfg.AddressFailureLimit == 0 {
		cfg.AddressFailureLimit = 30
	}
	if cfg.FailureWindow == 0 {
		cfg.FailureWindow = time.Minute
	}
	if cfg.OrgClaim == "" {
		cfg.OrgClaim = "org_id"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	cfg.JWKSHTTPClient = clientjwks.NewHTTPClient(cfg.JWKSHTTPClient, cfg.JWKSAllowPrivate, cfg.JWKSTransport)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Issuer = strings.TrimRight(cfg.Issuer, "/")
	s := &Service{
		pool: pool, feed: feed, clients: clients, keys: keys, audit: audit, cfg: cfg, log: cfg.Log, now: cfg.Now,
		macs:     secret.NewMACs(cfg.KeyEncryptionKey),
		refusals: newRefusals(cfg.Registry),
		limiter:  windowlimit.New(cfg.Now, cfg.FailureWindow, cfg.AddressFailureLimit),
		hashing:  make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		dpop:     dpopproof.NewChecker(cfg.Issuer, cfg.DPoPNonceRequired, cfg.KeyEncryptionKey, cfg.Now),
		dpopSeen: cache.New[string, struct{}](dpopSeenMax, cache.Expiring(cfg.Now)),
		revoked:  revoked.New(),
		jwks:     clientjwks.NewCache(),
		tokens:   cache.New[[32]byte, verifiedToken](tokenCacheMax, cache.Expiring(cfg.Now)),
	}
	s.builtin = newBuiltinVerifier(s)
	if cfg.ExternalIssuer != "" {
		s.external = newExternalVerifier(s)
	}
	feed.Subscribe(changes.TopicRevoked, s.revokedElsewhere)
	feed.Subscribe(changes.TopicClient, s.forgetClientKeys)
	feed.OnListen(s.loadRevoked)
	feed.OnLost(s.revoked.Lost)
	return s, nil
}

// revokedElsewhere records a revocation another instance announced.
func (s *Service) revokedElsewhere(subject string) {
	jti, exp, _ := strings.Cut(subject, " ")
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		// Not from this version of flowd: look every jti up until reconnected.
		s.revoked.Lost()
		return
	}
	s.revoked.Add(jti, time.Unix(unix, 0), s.now())
}

// Run removes expired refresh tokens and what else the token service keeps
// only for a while (sweepOnce) every ten minutes, until ctx ends; then it
// returns nil.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		s.sweepOnce(ctx)
	}
}

// sweepOnce deletes long-expired refresh tokens, the revocations of expired
// access tokens, the used jti of expired client assertions and the jtis of
// expired DPoP proofs, and completes the revoked set again when it
// overflowed.
func (s *Service) sweepOnce(ctx context.Context) {
	for _, del := range []func(context.Context, database.Querier) (int64, error){
		store.DeleteExpiredRefreshTokens, store.DeleteExpiredRevokedAccessTokens, store.DeleteExpiredAssertionJTIs, store.DeleteExpiredDPoPProofs,
	} {
		for {
			n, err := del(ctx, s.pool)
			if err != nil || n == 0 {
				break
			}
		}
	}
	s.revoked.Prune(s.now())
	s.dpopSeen.Prune()
	if err := s.loadRevoked(ctx); err != nil {
		s.log.WarnContext(ctx, "identity: loading revoked access tokens", "error", err)
	}
}

// Grants ends clients' grants: their refresh tokens (orgs.Grants). It
// keeps nothing of its own, so that orgs, which the token service reads
// clients through, can be built before it.
type Grants struct{}

// RevokeClientGrantsTx revokes every refresh token of clientID in tx.
func (Grants) RevokeClientGrantsTx(ctx context.Context, tx database.Tx, clientID string) error {
	return store.RevokeClientRefreshTokens(ctx, tx, clientID)
}
