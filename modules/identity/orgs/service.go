package orgs

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/internal/secret"
	"github.com/flowd/flowd/modules/identity/orgs/internal/store"
)

// DefaultHashParams are the production cost parameters of client secrets'
// argon2id hashes, OWASP's argon2id recommendation: a stolen database does
// not give secrets up cheaply, while checking an old secret stays affordable.
var DefaultHashParams = secrethash.Params{Memory: 19 * 1024, Iterations: 2, Parallelism: 1, SaltLength: 16, KeyLength: 32}

// Config is what organizations and clients need to know; cmd/flowd
// fills it from internal/config.
type Config struct {
	// KeyEncryptionKey keys the MACs of client secrets; without it new
	// secrets have only their argon2id hash.
	KeyEncryptionKey []byte
	// HashParams are argon2id's costs for new secrets; zero means DefaultHashParams.
	HashParams secrethash.Params
	// ClientJWKSHosts are the hosts a client's jwks_uri may be on
	// (FLOWD_CLIENT_JWKS_HOSTS); empty allows no jwks_uri.
	ClientJWKSHosts []string
	Log             *slog.Logger
}

// Cache sizes: past them, values are read from the database each time.
const (
	maxCachedOrganizations = 100_000
	maxCachedClients       = 100_000
)

// Service keeps organizations and their clients (Organizations, Clients,
// ClientRecords). What bearer verification and flow creation read on every
// request (an organization's settings and existence, a client's state, an
// external client's mapping) it keeps in caches that every instance empties
// when a change is announced on the feed: each change to those rows
// announces itself in its own transaction.
type Service struct {
	pool   *pgxpool.Pool
	feed   *changes.Feed
	cfg    Config
	log    *slog.Logger
	grants Grants
	macs   secret.MACs

	organizations *changes.Cache[string, Organization]
	existing      *changes.Cache[string, bool]
	states        *changes.Cache[string, clientState]
	externals     *changes.Cache[externalKey, externalClient]
}

// clientState is a client's state as cached: found false for no client.
type clientState struct {
	ClientState
	found bool
}

// externalKey names an external issuer's client.
type externalKey struct{ issuer, clientID string }

// externalClient is a mapping as cached: found false for an unmapped client.
type externalClient struct {
	ExternalClient
	found bool
}

var (
	_ Organizations = (*Service)(nil)
	_ Clients       = (*Service)(nil)
	_ ClientRecords = (*Service)(nil)
)

// New returns the organizations and clients on pool, their caches kept
// current through feed; grants ends a client's grants when its secret is
// replaced or it is revoked. It does not touch the database.
func New(pool *pgxpool.Pool, feed *changes.Feed, grants Grants, cfg Config) (*Service, error) {
	if pool == nil || feed == nil || grants == nil {
		return nil, errors.New("orgs: New needs a pool, the change feed and Grants")
	}
	if cfg.HashParams == (secrethash.Params{}) {
		cfg.HashParams = DefaultHashParams
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		pool: pool, feed: feed, cfg: cfg, log: cfg.Log, grants: grants, macs: secret.NewMACs(cfg.KeyEncryptionKey),
		organizations: changes.NewCache[string, Organization](feed, maxCachedOrganizations),
		existing:      changes.NewCache[string, bool](feed, maxCachedOrganizations),
		states:        changes.NewCache[string, clientState](feed, maxCachedClients),
		externals:     changes.NewCache[externalKey, externalClient](feed, maxCachedClients),
	}
	feed.Subscribe(changes.TopicClient, s.states.Forget)
	feed.Subscribe(changes.TopicOrganization, s.organizations.Forget)
	feed.Subscribe(changes.TopicExternal, func(string) { s.externals.ForgetAll() })
	return s, nil
}

// CreateOrganization implements Organizations.
func (s *Service) CreateOrganization(ctx context.Context, in NewOrganization) (Organization, error) {
	var o Organization
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		o, err = s.CreateOrganizationTx(ctx, tx, in)
		return err
	})
	return o, err
}

// CreateOrganizationTx implements Organizations.
func (s *Service) CreateOrganizationTx(ctx context.Context, tx database.Tx, in NewOrganization) (Organization, error) {
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

// Organization implements Organizations. Every flow created asks for its
// organization's settings, so they are cached; an organization not found
// is not.
func (s *Service) Organization(ctx context.Context, id string) (Organization, error) {
	org, err := s.organizations.Get(id, func() (Organization, bool, error) {
		row, err := store.GetOrganization(ctx, s.pool, id)
		if errors.Is(err, database.ErrNotFound) {
			return Organization{}, false, ErrOrganizationNotFound
		}
		if err != nil {
			return Organization{}, false, database.Classify(err)
		}
		return toOrganization(row), true, nil
	})
	if err != nil {
		return Organization{}, err
	}
	org.RedirectOrigins = slices.Clone(org.RedirectOrigins)
	return org, nil
}

// OrganizationExists implements Organizations and ClientRecords.
// Organizations are never deleted, so only their existence is cached: one
// created later must not meet a cached "no".
func (s *Service) OrganizationExists(ctx context.Context, id string) (bool, error) {
	return s.existing.Get(id, func() (bool, bool, error) {
		_, err := store.GetOrganization(ctx, s.pool, id)
		if errors.Is(err, database.ErrNotFound) {
			return false, false, nil
		}
		if err != nil {
			return false, false, database.Classify(err)
		}
		return true, true, nil
	})
}

// ListOrganizations implements Organizations.
func (s *Service) ListOrganizations(ctx context.Context) ([]Organization, error) {
	rows, err := store.ListOrganizations(ctx, s.pool)
	if err != nil {
		return nil, database.Classify(err)
	}
	out := make([]Organization, len(rows))
	for i, r := range rows {
		out[i] = toOrganization(r)
	}
	return out, nil
}

// UpdateOrganization implements Organizations. The change is announced in
// its own transaction, so every instance drops the organization's cached
// settings as it commits.
func (s *Service) UpdateOrganization(ctx context.Context, u OrganizationUpdate, before ...database.BeforeCommit[OrganizationChange]) (Organization, error) {
	u.RedirectOrigins = slices.Clone(u.RedirectOrigins)
	if err := u.Validate(); err != nil {
		return Organization{}, err
	}
	var row store.Organization
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		prev, err := store.LockOrganization(ctx, tx, u.ID)
		if err != nil {
			return err
		}
		row, err = store.UpdateOrganization(ctx, tx, store.Organization{ID: u.ID, OrganizationNumber: u.OrganizationNumber,
			ReferencePrefix: u.ReferencePrefix, RedirectOrigins: u.RedirectOrigins})
		if err != nil {
			return err
		}
		if err := changes.Notify(ctx, tx, changes.TopicOrganization, u.ID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, OrganizationChange{Before: toOrganization(prev), After: toOrganization(row)}, before)
	})
	if errors.Is(err, database.ErrNotFound) {
		return Organization{}, ErrOrganizationNotFound
	}
	if err != nil {
		return Organization{}, database.Classify(err)
	}
	s.organizations.Forget(u.ID)
	return toOrganization(row), nil
}

func toOrganization(r store.Organization) Organization {
	return Organization{ID: r.ID, Name: r.Name, OrganizationNumber: r.OrganizationNumber,
		ReferencePrefix: r.ReferencePrefix, RedirectOrigins: r.RedirectOrigins, CreatedAt: r.CreatedAt}
}
