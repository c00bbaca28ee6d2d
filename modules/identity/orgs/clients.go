package orgs

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/changes"
	"github.com/flowd/flowd/modules/identity/internal/secret"
	"github.com/flowd/flowd/modules/identity/orgs/internal/store"
)

// CreateClient implements Clients.
func (s *Service) CreateClient(ctx context.Context, in NewClient, before ...database.BeforeCommit[ClientCredentials]) (ClientCredentials, error) {
	in.Scopes = slices.Clone(in.Scopes)
	if err := invalidFields(in.Validate(), in.Keys.Validate(s.cfg.ClientJWKSHosts)); err != nil {
		return ClientCredentials{}, err
	}
	if _, err := s.Organization(ctx, in.OrganizationID); err != nil {
		return ClientCredentials{}, err
	}
	var (
		sec, hash string
		mac       []byte
	)
	if in.Keys.IsZero() || in.AlsoSecret {
		sec, hash, mac = s.newSecret()
	}
	var out ClientCredentials
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
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

// NewClientSecret makes a client secret of 256 random bits.
func NewClientSecret() string { return secret.Random("fcs_", 32) }

// newSecret makes a client secret with its argon2id hash, which earlier
// versions of flowd check, and its MAC, which this one checks.
func (s *Service) newSecret() (sec, storedHash string, mac []byte) {
	sec = NewClientSecret()
	storedHash, err := secrethash.Hash(sec, s.cfg.HashParams)
	if err != nil {
		// Only unusable parameters fail, and they come from code
		// (DefaultHashParams or a test's), never from input.
		panic(err)
	}
	return sec, storedHash, s.macs.Make(storedHash, sec)
}

// Client implements Clients.
func (s *Service) Client(ctx context.Context, clientID string) (Client, error) {
	row, err := store.GetClient(ctx, s.pool, clientID)
	if errors.Is(err, database.ErrNotFound) {
		return Client{}, ErrClientNotFound
	}
	if err != nil {
		return Client{}, database.Classify(err)
	}
	return toClient(row), nil
}

// ListClients implements Clients.
func (s *Service) ListClients(ctx context.Context, organizationID string) ([]Client, error) {
	rows, err := store.ListClients(ctx, s.pool, organizationID)
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
func (s *Service) RotateClientSecret(ctx context.Context, organizationID, clientID string, before ...database.BeforeCommit[ClientCredentials]) (ClientCredentials, error) {
	sec, hash, mac := s.newSecret()
	var row store.Client
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.SetClientSecret(ctx, tx, organizationID, clientID, hash, mac)
		if err != nil {
			return err
		}
		if err := s.grants.RevokeClientGrantsTx(ctx, tx, clientID); err != nil {
			return err
		}
		if err := changes.Notify(ctx, tx, changes.TopicClient, clientID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, ClientCredentials{Client: toClient(row), Secret: sec}, before)
	})
	if errors.Is(err, database.ErrNotFound) {
		return ClientCredentials{}, s.noSecretToRotate(ctx, organizationID, clientID)
	}
	if err != nil {
		return ClientCredentials{}, database.Classify(err)
	}
	return ClientCredentials{Client: toClient(row), Secret: sec}, nil
}

// noSecretToRotate tells why a secret rotation found no client:
// ErrNoClientSecret for the organization's active assertion-only client,
// else ErrClientNotFound.
func (s *Service) noSecretToRotate(ctx context.Context, organizationID, clientID string) error {
	c, err := store.GetClient(ctx, s.pool, clientID)
	if err == nil && c.OrganizationID == organizationID && c.RevokedAt == nil && c.SecretHash == "" {
		return ErrNoClientSecret
	}
	return ErrClientNotFound
}

// RevokeClient implements Clients.
func (s *Service) RevokeClient(ctx context.Context, organizationID, clientID string, before ...database.BeforeCommit[Client]) (Client, error) {
	var row store.Client
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.RevokeClient(ctx, tx, organizationID, clientID)
		if err != nil {
			return err
		}
		if err := s.grants.RevokeClientGrantsTx(ctx, tx, clientID); err != nil {
			return err
		}
		if err := changes.Notify(ctx, tx, changes.TopicClient, clientID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, toClient(row), before)
	})
	if errors.Is(err, database.ErrNotFound) {
		return Client{}, ErrClientNotFound
	}
	if err != nil {
		return Client{}, database.Classify(err)
	}
	s.states.Forget(clientID)
	return toClient(row), nil
}

// ReplaceClientKeys implements Clients. Replacing keys is routine rotation,
// not a sign of compromise: unlike a new secret it leaves the client's
// refresh tokens alone. This instance forgets at once what it fetched of
// the client's previous keys.
func (s *Service) ReplaceClientKeys(ctx context.Context, organizationID, clientID string, keys ClientKeys, before ...database.BeforeCommit[Client]) (Client, error) {
	keys.JWKS = bytes.Clone(keys.JWKS)
	if err := keys.Validate(s.cfg.ClientJWKSHosts); err != nil {
		return Client{}, err
	}
	if keys.IsZero() {
		return Client{}, apperr.InvalidFields([]apperr.FieldError{{Field: "jwks", Message: "give the new keys inline (jwks) or at a URL (jwksUri)"}})
	}
	var row store.Client
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.SetClientKeys(ctx, tx, organizationID, clientID, keys.JWKS, keys.JWKSURI)
		if err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, toClient(row), before)
	})
	if errors.Is(err, database.ErrNotFound) {
		return Client{}, ErrClientNotFound
	}
	if err != nil {
		return Client{}, database.Classify(err)
	}
	s.feed.Changed(changes.TopicClient, clientID)
	return toClient(row), nil
}

// SetClientDPoP implements Clients. The token endpoint reads the client's
// row on every request, so the change holds from its commit on; the
// announcement keeps the other instances' view of the client current.
func (s *Service) SetClientDPoP(ctx context.Context, organizationID, clientID string, on bool, before ...database.BeforeCommit[ClientChange]) (Client, error) {
	var change ClientChange
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		prev, err := store.GetClient(ctx, tx, clientID)
		if err != nil {
			return err
		}
		row, err := store.SetClientDPoPBound(ctx, tx, organizationID, clientID, on)
		if err != nil {
			return err
		}
		change = ClientChange{Before: toClient(prev), After: toClient(row)}
		if err := changes.Notify(ctx, tx, changes.TopicClient, clientID); err != nil {
			return err
		}
		if change.Before.DPoPBound == change.After.DPoPBound {
			return nil // nothing changed: nothing to record
		}
		return database.RunBeforeCommit(ctx, tx, change, before)
	})
	if errors.Is(err, database.ErrNotFound) {
		return Client{}, ErrClientNotFound
	}
	if err != nil {
		return Client{}, database.Classify(err)
	}
	s.states.Forget(clientID)
	return change.After, nil
}

// SetClientRateLimit implements Clients. Bearer verification reads the limit
// with the client's state, which every instance caches until the change's
// announcement drops it.
func (s *Service) SetClientRateLimit(ctx context.Context, organizationID, clientID string, limit identity.RateLimit, before ...database.BeforeCommit[ClientChange]) (Client, error) {
	if err := limit.Validate(); err != nil {
		return Client{}, err
	}
	var change ClientChange
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		prev, err := store.GetClient(ctx, tx, clientID)
		if err != nil {
			return err
		}
		row, err := store.SetClientRateLimit(ctx, tx, organizationID, clientID, rateLimitColumn(limit))
		if err != nil {
			return err
		}
		change = ClientChange{Before: toClient(prev), After: toClient(row)}
		if change.Before.RateLimit == change.After.RateLimit {
			return nil // nothing changed: nothing to announce or record
		}
		if err := changes.Notify(ctx, tx, changes.TopicClient, clientID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, change, before)
	})
	if errors.Is(err, database.ErrNotFound) {
		return Client{}, ErrClientNotFound
	}
	if err != nil {
		return Client{}, database.Classify(err)
	}
	s.states.Forget(clientID)
	return change.After, nil
}

// SetExternalClientRateLimit implements Clients.
func (s *Service) SetExternalClientRateLimit(ctx context.Context, issuer, clientID string, limit identity.RateLimit, before ...database.BeforeCommit[ExternalClient]) (ExternalClient, error) {
	if err := limit.Validate(); err != nil {
		return ExternalClient{}, err
	}
	var row store.ExternalClient
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		// Mappings are stored with the issuer as MapExternalClient trims it.
		row, err = store.SetExternalClientRateLimit(ctx, tx, strings.TrimRight(strings.TrimSpace(issuer), "/"), clientID, rateLimitColumn(limit))
		if err != nil {
			return err
		}
		if err := changes.Notify(ctx, tx, changes.TopicExternal, ""); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, toExternal(row), before)
	})
	if errors.Is(err, database.ErrNotFound) {
		return ExternalClient{}, ErrClientNotFound
	}
	if err != nil {
		return ExternalClient{}, database.Classify(err)
	}
	s.externals.ForgetAll()
	return toExternal(row), nil
}

// MapExternalClient implements Clients.
func (s *Service) MapExternalClient(ctx context.Context, in ExternalClient) (ExternalClient, error) {
	in.Scopes = slices.Clone(in.Scopes)
	if err := in.Validate(); err != nil {
		return ExternalClient{}, err
	}
	in.Issuer = strings.TrimRight(in.Issuer, "/")
	if _, err := s.Organization(ctx, in.OrganizationID); err != nil {
		return ExternalClient{}, err
	}
	var row store.ExternalClient
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.UpsertExternalClient(ctx, tx, store.ExternalClient{
			Issuer: in.Issuer, ClientID: in.ClientID, OrganizationID: in.OrganizationID, Scopes: in.Scopes, Sandbox: in.Sandbox,
		})
		if err != nil {
			return err
		}
		return changes.Notify(ctx, tx, changes.TopicExternal, "")
	})
	if err != nil {
		return ExternalClient{}, database.Classify(err)
	}
	s.externals.ForgetAll()
	return toExternal(row), nil
}

// ListExternalClients implements Clients.
func (s *Service) ListExternalClients(ctx context.Context, organizationID string) ([]ExternalClient, error) {
	rows, err := store.ListExternalClients(ctx, s.pool, organizationID)
	if err != nil {
		return nil, database.Classify(err)
	}
	out := make([]ExternalClient, len(rows))
	for i, r := range rows {
		out[i] = toExternal(r)
	}
	return out, nil
}

func toClient(r store.Client) Client {
	return Client{ID: r.ID, OrganizationID: r.OrganizationID, Name: r.Name, HasSecret: r.SecretHash != "",
		Keys: ClientKeys{JWKS: r.JWKS, JWKSURI: r.JWKSURI}, Scopes: r.Scopes, Sandbox: r.Sandbox,
		CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt, DPoPBound: r.DPoPBound, RateLimit: toRateLimit(r.RateLimit)}
}

func toExternal(r store.ExternalClient) ExternalClient {
	return ExternalClient{Issuer: r.Issuer, ClientID: r.ClientID, OrganizationID: r.OrganizationID,
		Scopes: r.Scopes, Sandbox: r.Sandbox, CreatedAt: r.CreatedAt, RateLimit: toRateLimit(r.RateLimit)}
}

// toRateLimit reads the api_rate_limit column: null is the default.
func toRateLimit(perMinute *int) identity.RateLimit {
	if perMinute == nil {
		return identity.RateLimit{}
	}
	return identity.RateLimit{Own: true, PerMinute: *perMinute}
}

// rateLimitColumn is r as the api_rate_limit column holds it.
func rateLimitColumn(r identity.RateLimit) *int {
	if !r.Own {
		return nil
	}
	return &r.PerMinute
}
