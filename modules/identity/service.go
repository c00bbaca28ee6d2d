package identity

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/identity/internal/secret"
	"github.com/flowd/flowd/modules/identity/internal/store"
)

// HashParams are the argon2id cost parameters of client secrets.
type HashParams = secrethash.Params

// DefaultHashParams are the production cost parameters, OWASP's argon2id
// recommendation: a stolen database does not give secrets up cheaply, while
// the token endpoint stays affordable under load.
var DefaultHashParams = secrethash.Params{Memory: 19 * 1024, Iterations: 2, Parallelism: 1, SaltLength: 16, KeyLength: 32}

// DefaultReceiptKeyRetention keeps receipt keys published for ten years:
// as long as records of consent are commonly kept.
const DefaultReceiptKeyRetention = 10 * 365 * 24 * time.Hour

// Config is what the identity module needs to know; internal/app fills it
// from internal/config.
type Config struct {
	// Issuer is the built-in provider's issuer: FLOWD_BASE_URL.
	Issuer string
	// Audience is the aud of built-in access tokens: FLOWD_AUDIENCE.
	Audience string
	// KeyEncryptionKey seals signing keys; required to issue tokens or rotate keys.
	KeyEncryptionKey []byte
	// ReceiptKeyRetention is how long a retired receipt key stays published,
	// so that the receipts it signed can still be checked
	// (FLOWD_RECEIPT_KEY_RETENTION); zero means DefaultReceiptKeyRetention.
	ReceiptKeyRetention time.Duration

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

	// HashParams are argon2id's costs for new secrets; zero means DefaultHashParams.
	HashParams HashParams
	// AccessTTL and RefreshTTL default to AccessTokenTTL and RefreshTokenTTL.
	AccessTTL, RefreshTTL time.Duration
	// APIRateLimit is how many API requests a minute a client without a
	// limit of its own may make (FLOWD_API_RATE_LIMIT); 0 is no limit.
	APIRateLimit int

	// AddressFailureLimit is how many costly client authentications (argon2id
	// of a secret without a MAC, a fetch of a jwks_uri) one address may fail
	// within FailureWindow before further costly ones answer 429; zero means
	// 30 and a minute.
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
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Module is the identity module: it implements Service.
type Module struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
	now  func() time.Time

	signer  signerCache
	keys    keyCache
	states  stateCache
	tokens  tokenCache
	revoked revokedTokens
	jwks    jwksCache
	macs    secretMACs
	limiter *costLimiter
	limits  *apiLimiter
	hashing chan struct{} // bounds concurrent argon2id work

	dpopSeen     seenProofs
	dpopNonceKey []byte

	builtin  *builtinVerifier
	external *externalVerifier
}

var _ Service = (*Module)(nil)

// New builds the identity module. It does not touch the database; Run keeps
// its caches coherent with other instances.
func New(pool *pgxpool.Pool, cfg Config) *Module {
	if cfg.HashParams == (HashParams{}) {
		cfg.HashParams = DefaultHashParams
	}
	if cfg.AccessTTL == 0 {
		cfg.AccessTTL = AccessTokenTTL
	}
	if cfg.RefreshTTL == 0 {
		cfg.RefreshTTL = RefreshTokenTTL
	}
	if cfg.ReceiptKeyRetention <= 0 {
		cfg.ReceiptKeyRetention = DefaultReceiptKeyRetention
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
	cfg.JWKSHTTPClient = jwksClient(cfg.JWKSHTTPClient, cfg.JWKSAllowPrivate)
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	cfg.Issuer = strings.TrimRight(cfg.Issuer, "/")
	m := &Module{
		pool: pool, cfg: cfg, log: cfg.Log, now: now,
		macs:    newSecretMACs(cfg.KeyEncryptionKey),
		limiter: newCostLimiter(now, cfg.FailureWindow, cfg.AddressFailureLimit),
		limits:  newAPILimiter(now, cfg.APIRateLimit),
		hashing: make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
	}
	m.states.init()
	m.tokens.init()
	m.revoked.init()
	m.keys.init()
	m.dpopSeen.init()
	m.dpopNonceKey = dpopNonceKey(cfg.KeyEncryptionKey)
	m.builtin = newBuiltinVerifier(m)
	if cfg.ExternalIssuer != "" {
		m.external = newExternalVerifier(m)
	}
	return m
}

// keyGrace is how long a retired key stays published and trusted: the
// lifetime of the tokens it signed, plus the time other instances may take
// to notice the rotation, plus clock skew.
func (m *Module) keyGrace() time.Duration { return m.cfg.AccessTTL + signerMaxAge + time.Minute }

// CreateOrganization implements Organizations.
func (m *Module) CreateOrganization(ctx context.Context, in NewOrganization) (Organization, error) {
	var o Organization
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		var err error
		o, err = m.CreateOrganizationTx(ctx, tx, in)
		return err
	})
	return o, err
}

// CreateOrganizationTx implements Organizations.
func (m *Module) CreateOrganizationTx(ctx context.Context, tx database.Tx, in NewOrganization) (Organization, error) {
	in.RedirectOrigins = slices.Clone(in.RedirectOrigins)
	if err := in.Validate(); err != nil {
		return Organization{}, err
	}
	row, err := store.InsertOrganization(ctx, tx, store.Organization{
		Name: in.Name, OrganizationNumber: in.OrganizationNumber, ReferencePrefix: in.ReferencePrefix, RedirectOrigins: in.RedirectOrigins,
	})
	if err != nil {
		return Organization{}, database.Classify(err)
	}
	return toOrganization(row), nil
}

// Organization implements Organizations. Every create asks for its
// organization's settings, so the row is kept in the state cache, which
// every instance empties when a change to identity's rows is announced on
// store.NotifyChannel: a change to an organization must call store.Notify
// in its transaction (any payload other than "client:…" and "keys" empties
// the whole cache). An organization not found is not cached.
func (m *Module) Organization(ctx context.Context, id string) (Organization, error) {
	v, err := m.states.get("orgrow:"+id, func() (any, bool, error) {
		row, err := store.GetOrganization(ctx, m.pool, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, ErrOrganizationNotFound
		}
		if err != nil {
			return nil, false, database.Classify(err)
		}
		return toOrganization(row), true, nil
	})
	if err != nil {
		return Organization{}, err
	}
	org := v.(Organization)
	org.RedirectOrigins = slices.Clone(org.RedirectOrigins)
	return org, nil
}

// ListOrganizations implements Organizations.
func (m *Module) ListOrganizations(ctx context.Context) ([]Organization, error) {
	rows, err := store.ListOrganizations(ctx, m.pool)
	if err != nil {
		return nil, database.Classify(err)
	}
	out := make([]Organization, len(rows))
	for i, r := range rows {
		out[i] = toOrganization(r)
	}
	return out, nil
}

// UpdateOrganization implements Organizations. The change is announced on
// store.NotifyChannel in its own transaction, so every instance's caches
// drop the organization as it commits.
func (m *Module) UpdateOrganization(ctx context.Context, u OrganizationUpdate, before ...database.BeforeCommit[OrganizationChange]) (Organization, error) {
	u.RedirectOrigins = slices.Clone(u.RedirectOrigins)
	if err := u.Validate(); err != nil {
		return Organization{}, err
	}
	var row store.Organization
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		prev, err := store.LockOrganization(ctx, tx, u.ID)
		if err != nil {
			return err
		}
		row, err = store.UpdateOrganization(ctx, tx, store.Organization{ID: u.ID, OrganizationNumber: u.OrganizationNumber,
			ReferencePrefix: u.ReferencePrefix, RedirectOrigins: u.RedirectOrigins})
		if err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, OrganizationChange{Before: toOrganization(prev), After: toOrganization(row)}, before)
	})
	if errors.Is(err, store.ErrNotFound) {
		return Organization{}, ErrOrganizationNotFound
	}
	if err != nil {
		return Organization{}, database.Classify(err)
	}
	m.states.invalidateAll()
	return toOrganization(row), nil
}

func toOrganization(r store.Organization) Organization {
	return Organization{ID: r.ID, Name: r.Name, OrganizationNumber: r.OrganizationNumber,
		ReferencePrefix: r.ReferencePrefix, RedirectOrigins: r.RedirectOrigins, CreatedAt: r.CreatedAt}
}

// CreateClient implements Clients.
func (m *Module) CreateClient(ctx context.Context, in NewClient, before ...database.BeforeCommit[ClientCredentials]) (ClientCredentials, error) {
	in.Scopes = slices.Clone(in.Scopes)
	if err := invalidFields(in.Validate(), in.Keys.Validate(m.cfg.ClientJWKSHosts)); err != nil {
		return ClientCredentials{}, err
	}
	if _, err := m.Organization(ctx, in.OrganizationID); err != nil {
		return ClientCredentials{}, err
	}
	var (
		sec, hash string
		mac       []byte
	)
	if in.Keys.IsZero() || in.AlsoSecret {
		sec, hash, mac = m.newSecret()
	}
	var out ClientCredentials
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		row, err := store.InsertClient(ctx, tx, store.Client{
			ID: newClientID(), OrganizationID: in.OrganizationID, Name: in.Name,
			SecretHash: hash, SecretMAC: mac, JWKS: in.Keys.JWKS, JWKSURI: in.Keys.JWKSURI, Scopes: in.Scopes, Sandbox: in.Sandbox, DPoPBound: in.DPoPBound,
		})
		if err != nil {
			return err
		}
		out = ClientCredentials{Client: toClient(row), Secret: sec}
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil {
		return ClientCredentials{}, database.Classify(err)
	}
	return out, nil
}

// newClientID makes a client id: recognizable, URL-safe, unguessable enough
// that ids do not leak how many clients exist.
func newClientID() string { return secret.ID("fc_", 10) }

// newClientSecret makes a client secret of 256 random bits.
func newClientSecret() string { return secret.Random("fcs_", 32) }

// Client implements Clients.
func (m *Module) Client(ctx context.Context, clientID string) (Client, error) {
	row, err := store.GetClient(ctx, m.pool, clientID)
	if errors.Is(err, store.ErrNotFound) {
		return Client{}, ErrClientNotFound
	}
	if err != nil {
		return Client{}, database.Classify(err)
	}
	return toClient(row), nil
}

// ListClients implements Clients.
func (m *Module) ListClients(ctx context.Context, organizationID string) ([]Client, error) {
	rows, err := store.ListClients(ctx, m.pool, organizationID)
	if err != nil {
		return nil, database.Classify(err)
	}
	out := make([]Client, len(rows))
	for i, r := range rows {
		out[i] = toClient(r)
	}
	return out, nil
}

// RotateClientSecret implements Clients.
func (m *Module) RotateClientSecret(ctx context.Context, organizationID, clientID string, before ...database.BeforeCommit[ClientCredentials]) (ClientCredentials, error) {
	sec, hash, mac := m.newSecret()
	var row store.Client
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.SetClientSecret(ctx, tx, organizationID, clientID, hash, mac)
		if err != nil {
			return err
		}
		if err := store.Notify(ctx, tx, "client:"+clientID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, ClientCredentials{Client: toClient(row), Secret: sec}, before)
	})
	if errors.Is(err, store.ErrNotFound) {
		return ClientCredentials{}, m.noSecretToRotate(ctx, organizationID, clientID)
	}
	if err != nil {
		return ClientCredentials{}, database.Classify(err)
	}
	return ClientCredentials{Client: toClient(row), Secret: sec}, nil
}

// RevokeClient implements Clients.
func (m *Module) RevokeClient(ctx context.Context, organizationID, clientID string, before ...database.BeforeCommit[Client]) (Client, error) {
	var row store.Client
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.RevokeClient(ctx, tx, organizationID, clientID)
		if err != nil {
			return err
		}
		if err := store.Notify(ctx, tx, "client:"+clientID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, toClient(row), before)
	})
	if errors.Is(err, store.ErrNotFound) {
		return Client{}, ErrClientNotFound
	}
	if err != nil {
		return Client{}, database.Classify(err)
	}
	m.states.invalidate("client:" + clientID)
	return toClient(row), nil
}

func toClient(r store.Client) Client {
	return Client{ID: r.ID, OrganizationID: r.OrganizationID, Name: r.Name, HasSecret: r.SecretHash != "",
		Keys: ClientKeys{JWKS: r.JWKS, JWKSURI: r.JWKSURI}, Scopes: r.Scopes, Sandbox: r.Sandbox,
		CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt, DPoPBound: r.DPoPBound, RateLimit: toRateLimit(r.RateLimit)}
}

// MapExternalClient implements Clients.
func (m *Module) MapExternalClient(ctx context.Context, in ExternalClient) (ExternalClient, error) {
	in.Scopes = slices.Clone(in.Scopes)
	if err := in.Validate(); err != nil {
		return ExternalClient{}, err
	}
	in.Issuer = strings.TrimRight(in.Issuer, "/")
	if _, err := m.Organization(ctx, in.OrganizationID); err != nil {
		return ExternalClient{}, err
	}
	var row store.ExternalClient
	err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.UpsertExternalClient(ctx, tx, store.ExternalClient{
			Issuer: in.Issuer, ClientID: in.ClientID, OrganizationID: in.OrganizationID, Scopes: in.Scopes, Sandbox: in.Sandbox,
		})
		if err != nil {
			return err
		}
		return store.Notify(ctx, tx, "external")
	})
	if err != nil {
		return ExternalClient{}, database.Classify(err)
	}
	m.states.invalidateAll()
	return toExternal(row), nil
}

// ListExternalClients implements Clients.
func (m *Module) ListExternalClients(ctx context.Context, organizationID string) ([]ExternalClient, error) {
	rows, err := store.ListExternalClients(ctx, m.pool, organizationID)
	if err != nil {
		return nil, database.Classify(err)
	}
	out := make([]ExternalClient, len(rows))
	for i, r := range rows {
		out[i] = toExternal(r)
	}
	return out, nil
}

func toExternal(r store.ExternalClient) ExternalClient {
	return ExternalClient{Issuer: r.Issuer, ClientID: r.ClientID, OrganizationID: r.OrganizationID,
		Scopes: r.Scopes, Sandbox: r.Sandbox, CreatedAt: r.CreatedAt, RateLimit: toRateLimit(r.RateLimit)}
}

// mustHash hashes a client secret. It fails only for unusable parameters,
// which come from code (DefaultHashParams or a test's), never from input.
func mustHash(sec string, p HashParams) string {
	h, err := secrethash.Hash(sec, p)
	if err != nil {
		panic(err)
	}
	return h
}
