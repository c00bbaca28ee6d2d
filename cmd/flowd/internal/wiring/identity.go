// Package wiring builds, from flowd's settings, the parts that both the server
// and the admin commands use: the identity module's parts, the directory
// other modules ask about organizations, and the logger.
package wiring

import (
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens"
)

// Identity is the identity module's parts as one instance (or one
// command) uses them, each built from the others it needs. serve runs the
// feed, which keeps their caches current across instances, the token
// service's sweep and the rate limits' reconciliation beside the server.
type Identity struct {
	Feed   *changes.Feed
	Keys   *keys.Service
	Audit  *audit.Store
	Orgs   *orgs.Service
	Tokens *tokens.Service
	Limits *orgs.Limits
}

// NewIdentity builds identity's parts on env; its tracing wraps their
// jwks_uri fetches. It does not touch the database.
func NewIdentity(env Env) (*Identity, error) {
	cfg, pool, log, tracing, reg := env.Config, env.Pool, env.log(), env.Tracing, env.registry()
	feed := changes.NewFeed(pool, log)
	signing, err := keys.New(pool, feed, keys.Config{KeyEncryptionKey: cfg.KeyEncryptionKey,
		ReceiptKeyRetention: cfg.ReceiptKeyRetention, Log: log, Registry: reg})
	if err != nil {
		return nil, err
	}
	auditLog, err := audit.New(pool)
	if err != nil {
		return nil, err
	}
	// A client's secret rotation and revocation end its refresh tokens,
	// which the token service keeps, in the change's transaction.
	organizations, err := orgs.New(pool, feed, tokens.Grants{}, orgs.Config{KeyEncryptionKey: cfg.KeyEncryptionKey,
		ClientJWKSHosts: cfg.ClientJWKSHosts, Log: log})
	if err != nil {
		return nil, err
	}
	tokenService, err := tokens.New(pool, feed, organizations, signing, auditLog, tokens.Config{
		Issuer:            cfg.BaseURL.String(),
		Audience:          cfg.Audience,
		KeyEncryptionKey:  cfg.KeyEncryptionKey,
		ExternalIssuer:    cfg.OIDCIssuer,
		ExternalAudiences: cfg.OIDCAudience,
		OrgClaim:          cfg.OrgClaim,
		ClientJWKSHosts:   cfg.ClientJWKSHosts,
		JWKSAllowPrivate:  cfg.WebhookAllowPrivate,
		JWKSTransport:     tracing.WrapTransport("jwks_uri fetch"),
		DPoPNonceRequired: cfg.DPoPNonce == "required",
		Log:               log,
		Registry:          reg,
	})
	if err != nil {
		return nil, err
	}
	return &Identity{
		Feed: feed, Keys: signing, Audit: auditLog, Orgs: organizations, Tokens: tokenService,
		Limits: orgs.NewLimits(pool, orgs.LimitsConfig{PerMinute: cfg.APIRateLimit, Log: log}),
	}, nil
}
