// Package store is the SQL of organizations and their API clients: the
// organizations, api_clients, external_clients and api_rate_windows tables.
// Its functions take a querier (a pool or a transaction) so that the caller
// decides the unit of work.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Organization is a row of organizations.
type Organization struct {
	ID                 string
	Name               string
	OrganizationNumber string
	ReferencePrefix    string
	RedirectOrigins    []string
	CreatedAt          time.Time
}

const orgColumns = "id::text, name, organization_number, reference_prefix, redirect_origins, created_at"

func scanOrg(row pgx.Row) (Organization, error) {
	var o Organization
	err := row.Scan(&o.ID, &o.Name, &o.OrganizationNumber, &o.ReferencePrefix, &o.RedirectOrigins, &o.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, database.ErrNotFound
	}
	return o, err
}

// InsertOrganization stores a new organization.
func InsertOrganization(ctx context.Context, q database.Querier, o Organization) (Organization, error) {
	if o.RedirectOrigins == nil {
		o.RedirectOrigins = []string{}
	}
	return scanOrg(q.QueryRow(ctx, `insert into organizations (name, organization_number, reference_prefix, redirect_origins)
		values ($1, $2, $3, $4) returning `+orgColumns, o.Name, o.OrganizationNumber, o.ReferencePrefix, o.RedirectOrigins))
}

// GetOrganization returns one organization; an id that is not a UUID is database.ErrNotFound.
func GetOrganization(ctx context.Context, q database.Querier, id string) (Organization, error) {
	if !isUUID(id) {
		return Organization{}, database.ErrNotFound
	}
	return scanOrg(q.QueryRow(ctx, "select "+orgColumns+" from organizations where id = $1", id))
}

// LockOrganization returns one organization and locks its row until the
// transaction ends, so that what it returns is what an update replaces.
func LockOrganization(ctx context.Context, q database.Querier, id string) (Organization, error) {
	if !isUUID(id) {
		return Organization{}, database.ErrNotFound
	}
	return scanOrg(q.QueryRow(ctx, "select "+orgColumns+" from organizations where id = $1 for update", id))
}

// ListOrganizations returns every organization, oldest first.
func ListOrganizations(ctx context.Context, q database.Querier) ([]Organization, error) {
	rows, err := q.Query(ctx, "select "+orgColumns+" from organizations order by created_at, id")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Organization, error) { return scanOrg(r) })
}

// Client is a row of api_clients.
type Client struct {
	ID             string
	OrganizationID string
	Name           string
	SecretHash     string // empty for an assertion-only client
	// SecretMAC is the secret's keyed MAC, tagged with the SecretHash it
	// was made beside; nil until made.
	SecretMAC  []byte
	JWKS       []byte // the registered public keys, or nil
	JWKSURI    string // where the public keys are, or empty
	Scopes     []string
	Sandbox    bool
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	// DPoPBound is dpop_bound_access_tokens: token requests need a DPoP proof.
	DPoPBound bool
	// RateLimit is api_rate_limit: the client's own limit of API requests
	// per minute (0: none), nil when the default applies.
	RateLimit *int
}

const clientColumns = "id, organization_id::text, name, coalesce(secret_hash, ''), secret_mac, jwks, coalesce(jwks_uri, ''), scopes, sandbox, created_at, last_used_at, revoked_at, dpop_bound_access_tokens, api_rate_limit"

func scanClient(row pgx.Row) (Client, error) {
	var c Client
	err := row.Scan(&c.ID, &c.OrganizationID, &c.Name, &c.SecretHash, &c.SecretMAC, &c.JWKS, &c.JWKSURI, &c.Scopes, &c.Sandbox, &c.CreatedAt, &c.LastUsedAt, &c.RevokedAt, &c.DPoPBound, &c.RateLimit)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, database.ErrNotFound
	}
	return c, err
}

// InsertClient stores a new API client.
func InsertClient(ctx context.Context, q database.Querier, c Client) (Client, error) {
	return scanClient(q.QueryRow(ctx, `insert into api_clients (id, organization_id, name, secret_hash, secret_mac, jwks, jwks_uri, scopes, sandbox, dpop_bound_access_tokens)
		values ($1, $2, $3, nullif($4, ''), $5, $6, nullif($7, ''), $8, $9, $10) returning `+clientColumns,
		c.ID, c.OrganizationID, c.Name, c.SecretHash, c.SecretMAC, c.JWKS, c.JWKSURI, c.Scopes, c.Sandbox, c.DPoPBound))
}

// GetClient returns one client.
func GetClient(ctx context.Context, q database.Querier, id string) (Client, error) {
	return scanClient(q.QueryRow(ctx, "select "+clientColumns+" from api_clients where id = $1", id))
}

// ListClients returns an organization's clients, oldest first.
func ListClients(ctx context.Context, q database.Querier, organizationID string) ([]Client, error) {
	if !isUUID(organizationID) {
		return nil, nil
	}
	rows, err := q.Query(ctx, "select "+clientColumns+" from api_clients where organization_id = $1 order by created_at, id", organizationID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Client, error) { return scanClient(r) })
}

// SetClientSecret replaces an active client's secret hash and MAC; an
// assertion-only client (no secret) is not found.
func SetClientSecret(ctx context.Context, q database.Querier, organizationID, id, hash string, mac []byte) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, database.ErrNotFound
	}
	return scanClient(q.QueryRow(ctx, `update api_clients set secret_hash = $3, secret_mac = $4, secret_rotated_at = now()
		where id = $1 and organization_id = $2 and revoked_at is null and secret_hash is not null returning `+clientColumns, id, organizationID, hash, mac))
}

// SetClientSecretMAC stores the MAC of a client's secret beside its hash,
// unless the hash has changed meanwhile.
func SetClientSecretMAC(ctx context.Context, q database.Querier, id, hash string, mac []byte) error {
	_, err := q.Exec(ctx, "update api_clients set secret_mac = $3 where id = $1 and secret_hash = $2", id, hash, mac)
	return err
}

// RevokeClient marks a client revoked, keeping the first revocation time.
func RevokeClient(ctx context.Context, q database.Querier, organizationID, id string) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, database.ErrNotFound
	}
	return scanClient(q.QueryRow(ctx, `update api_clients set revoked_at = coalesce(revoked_at, now())
		where id = $1 and organization_id = $2 returning `+clientColumns, id, organizationID))
}

// TouchClient records that a client obtained a token, at most once a minute
// so that busy clients do not write on every request.
func TouchClient(ctx context.Context, q database.Querier, id string) error {
	_, err := q.Exec(ctx, `update api_clients set last_used_at = now()
		where id = $1 and (last_used_at is null or last_used_at < now() - interval '1 minute')`, id)
	return err
}

// ClientState is what bearer verification needs to know of a client.
type ClientState struct {
	OrganizationID string
	Sandbox        bool
	Revoked        bool
	RateLimit      *int // as in Client
}

// GetClientState reads a client's state by its primary key.
func GetClientState(ctx context.Context, q database.Querier, id string) (ClientState, error) {
	var s ClientState
	err := q.QueryRow(ctx, "select organization_id::text, sandbox, revoked_at is not null, api_rate_limit from api_clients where id = $1", id).
		Scan(&s.OrganizationID, &s.Sandbox, &s.Revoked, &s.RateLimit)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, database.ErrNotFound
	}
	return s, err
}

// ExternalClient is a row of external_clients.
type ExternalClient struct {
	Issuer         string
	ClientID       string
	OrganizationID string
	Scopes         []string
	Sandbox        bool
	CreatedAt      time.Time
	RateLimit      *int // as in Client
}

const externalColumns = "issuer, client_id, organization_id::text, scopes, sandbox, created_at, api_rate_limit"

func scanExternal(row pgx.Row) (ExternalClient, error) {
	var x ExternalClient
	err := row.Scan(&x.Issuer, &x.ClientID, &x.OrganizationID, &x.Scopes, &x.Sandbox, &x.CreatedAt, &x.RateLimit)
	if errors.Is(err, pgx.ErrNoRows) {
		return x, database.ErrNotFound
	}
	return x, err
}

// UpsertExternalClient stores or replaces a mapping.
func UpsertExternalClient(ctx context.Context, q database.Querier, x ExternalClient) (ExternalClient, error) {
	return scanExternal(q.QueryRow(ctx, `insert into external_clients (issuer, client_id, organization_id, scopes, sandbox)
		values ($1, $2, $3, $4, $5)
		on conflict (issuer, client_id) do update set organization_id = excluded.organization_id,
			scopes = excluded.scopes, sandbox = excluded.sandbox
		returning `+externalColumns, x.Issuer, x.ClientID, x.OrganizationID, x.Scopes, x.Sandbox))
}

// GetExternalClient returns the mapping of one external client.
func GetExternalClient(ctx context.Context, q database.Querier, issuer, clientID string) (ExternalClient, error) {
	return scanExternal(q.QueryRow(ctx, "select "+externalColumns+" from external_clients where issuer = $1 and client_id = $2", issuer, clientID))
}

// ListExternalClients returns an organization's mappings.
func ListExternalClients(ctx context.Context, q database.Querier, organizationID string) ([]ExternalClient, error) {
	if !isUUID(organizationID) {
		return nil, nil
	}
	rows, err := q.Query(ctx, "select "+externalColumns+" from external_clients where organization_id = $1 order by created_at", organizationID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ExternalClient, error) { return scanExternal(r) })
}

// isUUID reports whether s has the textual form of a UUID, so that a
// malformed id is "not found" rather than a database error.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// UpdateOrganization replaces an organization's settings.
func UpdateOrganization(ctx context.Context, q database.Querier, o Organization) (Organization, error) {
	if !isUUID(o.ID) {
		return Organization{}, database.ErrNotFound
	}
	if o.RedirectOrigins == nil {
		o.RedirectOrigins = []string{}
	}
	return scanOrg(q.QueryRow(ctx, `update organizations set organization_number = $2, reference_prefix = $3,
		redirect_origins = $4 where id = $1 returning `+orgColumns, o.ID, o.OrganizationNumber, o.ReferencePrefix, o.RedirectOrigins))
}
