// Package store is the identity module's SQL. Its functions take a querier (a
// pool or a transaction) so that the caller decides the unit of work.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what both *pgxpool.Pool and pgx.Tx offer.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNotFound is returned when a row does not exist.
var ErrNotFound = errors.New("not found")

// NotifyChannel is the PostgreSQL channel on which changes that caches must
// see are announced: "client:<id>", "keys", "external", "jti:<jti> <exp>".
const NotifyChannel = "flowd_identity"

// Notify announces a change on NotifyChannel when q's transaction commits.
func Notify(ctx context.Context, q Querier, payload string) error {
	_, err := q.Exec(ctx, "select pg_notify($1, $2)", NotifyChannel, payload)
	return err
}

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
		return o, ErrNotFound
	}
	return o, err
}

// InsertOrganization stores a new organization.
func InsertOrganization(ctx context.Context, q Querier, o Organization) (Organization, error) {
	if o.RedirectOrigins == nil {
		o.RedirectOrigins = []string{}
	}
	return scanOrg(q.QueryRow(ctx, `insert into organizations (name, organization_number, reference_prefix, redirect_origins)
		values ($1, $2, $3, $4) returning `+orgColumns, o.Name, o.OrganizationNumber, o.ReferencePrefix, o.RedirectOrigins))
}

// GetOrganization returns one organization; an id that is not a UUID is ErrNotFound.
func GetOrganization(ctx context.Context, q Querier, id string) (Organization, error) {
	if !isUUID(id) {
		return Organization{}, ErrNotFound
	}
	return scanOrg(q.QueryRow(ctx, "select "+orgColumns+" from organizations where id = $1", id))
}

// LockOrganization returns one organization and locks its row until the
// transaction ends, so that what it returns is what an update replaces.
func LockOrganization(ctx context.Context, q Querier, id string) (Organization, error) {
	if !isUUID(id) {
		return Organization{}, ErrNotFound
	}
	return scanOrg(q.QueryRow(ctx, "select "+orgColumns+" from organizations where id = $1 for update", id))
}

// ListOrganizations returns every organization, oldest first.
func ListOrganizations(ctx context.Context, q Querier) ([]Organization, error) {
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
		return c, ErrNotFound
	}
	return c, err
}

// InsertClient stores a new API client.
func InsertClient(ctx context.Context, q Querier, c Client) (Client, error) {
	return scanClient(q.QueryRow(ctx, `insert into api_clients (id, organization_id, name, secret_hash, secret_mac, jwks, jwks_uri, scopes, sandbox, dpop_bound_access_tokens)
		values ($1, $2, $3, nullif($4, ''), $5, $6, nullif($7, ''), $8, $9, $10) returning `+clientColumns,
		c.ID, c.OrganizationID, c.Name, c.SecretHash, c.SecretMAC, c.JWKS, c.JWKSURI, c.Scopes, c.Sandbox, c.DPoPBound))
}

// GetClient returns one client.
func GetClient(ctx context.Context, q Querier, id string) (Client, error) {
	return scanClient(q.QueryRow(ctx, "select "+clientColumns+" from api_clients where id = $1", id))
}

// ListClients returns an organization's clients, oldest first.
func ListClients(ctx context.Context, q Querier, organizationID string) ([]Client, error) {
	if !isUUID(organizationID) {
		return nil, nil
	}
	rows, err := q.Query(ctx, "select "+clientColumns+" from api_clients where organization_id = $1 order by created_at, id", organizationID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Client, error) { return scanClient(r) })
}

// SetClientSecret replaces an active client's secret hash and MAC and
// revokes its refresh tokens; an assertion-only client (no secret) is not
// found.
func SetClientSecret(ctx context.Context, q Querier, organizationID, id, hash string, mac []byte) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, ErrNotFound
	}
	c, err := scanClient(q.QueryRow(ctx, `update api_clients set secret_hash = $3, secret_mac = $4, secret_rotated_at = now()
		where id = $1 and organization_id = $2 and revoked_at is null and secret_hash is not null returning `+clientColumns, id, organizationID, hash, mac))
	if err != nil {
		return c, err
	}
	if _, err := q.Exec(ctx, "update refresh_tokens set revoked_at = now() where client_id = $1 and revoked_at is null", id); err != nil {
		return c, err
	}
	return c, nil
}

// SetClientSecretMAC stores the MAC of a client's secret beside its hash,
// unless the hash has changed meanwhile.
func SetClientSecretMAC(ctx context.Context, q Querier, id, hash string, mac []byte) error {
	_, err := q.Exec(ctx, "update api_clients set secret_mac = $3 where id = $1 and secret_hash = $2", id, hash, mac)
	return err
}

// RevokeClient marks a client revoked (keeping the first revocation time) and
// revokes its refresh tokens.
func RevokeClient(ctx context.Context, q Querier, organizationID, id string) (Client, error) {
	if !isUUID(organizationID) {
		return Client{}, ErrNotFound
	}
	c, err := scanClient(q.QueryRow(ctx, `update api_clients set revoked_at = coalesce(revoked_at, now())
		where id = $1 and organization_id = $2 returning `+clientColumns, id, organizationID))
	if err != nil {
		return c, err
	}
	if _, err := q.Exec(ctx, "update refresh_tokens set revoked_at = now() where client_id = $1 and revoked_at is null", id); err != nil {
		return c, err
	}
	return c, nil
}

// TouchClient records that a client obtained a token, at most once a minute
// so that busy clients do not write on every request.
func TouchClient(ctx context.Context, q Querier, id string) error {
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
func GetClientState(ctx context.Context, q Querier, id string) (ClientState, error) {
	var s ClientState
	err := q.QueryRow(ctx, "select organization_id::text, sandbox, revoked_at is not null, api_rate_limit from api_clients where id = $1", id).
		Scan(&s.OrganizationID, &s.Sandbox, &s.Revoked, &s.RateLimit)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, ErrNotFound
	}
	return s, err
}

// SigningKey is a row of signing_keys.
type SigningKey struct {
	ID        string
	Purpose   string // "token" or "receipt"
	Algorithm string
	PublicJWK []byte
	Sealed    []byte
	CreatedAt time.Time
	RetiredAt *time.Time
}

// ActiveSigningKey returns the key of purpose and algorithm that signs now, or ErrNotFound.
func ActiveSigningKey(ctx context.Context, q Querier, purpose, algorithm string) (SigningKey, error) {
	var k SigningKey
	err := q.QueryRow(ctx, `select id, purpose, algorithm, public_jwk, private_key_sealed, created_at, retired_at
		from signing_keys where retired_at is null and purpose = $1 and algorithm = $2`, purpose, algorithm).
		Scan(&k.ID, &k.Purpose, &k.Algorithm, &k.PublicJWK, &k.Sealed, &k.CreatedAt, &k.RetiredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, ErrNotFound
	}
	return k, err
}

// PublishedKeys returns the active keys, the token keys retired less than
// tokenGrace ago and the receipt keys retired less than receiptGrace ago,
// newest first.
func PublishedKeys(ctx context.Context, q Querier, tokenGrace, receiptGrace time.Duration) ([]SigningKey, error) {
	rows, err := q.Query(ctx, `select id, purpose, algorithm, public_jwk, created_at, retired_at from signing_keys
		where retired_at is null
		   or retired_at > now() - make_interval(secs => case purpose when 'receipt' then $2::float8 else $1::float8 end)
		order by created_at desc, purpose desc, algorithm`, tokenGrace.Seconds(), receiptGrace.Seconds())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SigningKey, error) {
		var k SigningKey
		err := r.Scan(&k.ID, &k.Purpose, &k.Algorithm, &k.PublicJWK, &k.CreatedAt, &k.RetiredAt)
		return k, err
	})
}

// LockSigningKeys serializes key creation and rotation across instances.
func LockSigningKeys(ctx context.Context, q Querier) error {
	_, err := q.Exec(ctx, "select pg_advisory_xact_lock(7230164003)")
	return err
}

// RetireActiveKey retires the key of purpose and algorithm that signs now, if any.
func RetireActiveKey(ctx context.Context, q Querier, purpose, algorithm string) error {
	_, err := q.Exec(ctx, "update signing_keys set retired_at = now() where retired_at is null and purpose = $1 and algorithm = $2",
		purpose, algorithm)
	return err
}

// InsertSigningKey stores a new active key of its purpose and algorithm.
func InsertSigningKey(ctx context.Context, q Querier, k SigningKey) error {
	_, err := q.Exec(ctx, `insert into signing_keys (id, purpose, algorithm, public_jwk, private_key_sealed) values ($1, $2, $3, $4, $5)`,
		k.ID, k.Purpose, k.Algorithm, k.PublicJWK, k.Sealed)
	return err
}

// RefreshToken is a row of refresh_tokens.
type RefreshToken struct {
	Hash      []byte
	FamilyID  string
	ClientID  string
	Scopes    []string
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
	RevokedAt *time.Time
	// DPoPJKT is the thumbprint of the DPoP key the family is bound to; empty when unbound.
	DPoPJKT string
}

const refreshColumns = "token_hash, family_id::text, client_id, scopes, created_at, expires_at, used_at, revoked_at, coalesce(dpop_jkt, '')"

func scanRefreshToken(row pgx.Row) (RefreshToken, error) {
	var t RefreshToken
	err := row.Scan(&t.Hash, &t.FamilyID, &t.ClientID, &t.Scopes, &t.CreatedAt, &t.ExpiresAt, &t.UsedAt, &t.RevokedAt, &t.DPoPJKT)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrNotFound
	}
	return t, err
}

// InsertRefreshToken stores a refresh token's hash.
func InsertRefreshToken(ctx context.Context, q Querier, t RefreshToken) error {
	_, err := q.Exec(ctx, `insert into refresh_tokens (token_hash, family_id, client_id, scopes, expires_at, dpop_jkt)
		values ($1, $2, $3, $4, $5, nullif($6, ''))`,
		t.Hash, t.FamilyID, t.ClientID, t.Scopes, t.ExpiresAt, t.DPoPJKT)
	return err
}

// LockRefreshToken reads a refresh token for update.
func LockRefreshToken(ctx context.Context, q Querier, hash []byte) (RefreshToken, error) {
	return scanRefreshToken(q.QueryRow(ctx, "select "+refreshColumns+" from refresh_tokens where token_hash = $1 for update", hash))
}

// GetRefreshToken reads a refresh token.
func GetRefreshToken(ctx context.Context, q Querier, hash []byte) (RefreshToken, error) {
	return scanRefreshToken(q.QueryRow(ctx, "select "+refreshColumns+" from refresh_tokens where token_hash = $1", hash))
}

// MarkRefreshTokenUsed records the one use of a refresh token.
func MarkRefreshTokenUsed(ctx context.Context, q Querier, hash []byte) error {
	_, err := q.Exec(ctx, "update refresh_tokens set used_at = now() where token_hash = $1", hash)
	return err
}

// RevokeFamily revokes every refresh token of a family and returns how many
// were not revoked before.
func RevokeFamily(ctx context.Context, q Querier, familyID string) (int64, error) {
	tag, err := q.Exec(ctx, "update refresh_tokens set revoked_at = now() where family_id = $1 and revoked_at is null", familyID)
	return tag.RowsAffected(), err
}

// DeleteExpiredRefreshTokens removes refresh tokens expired for a day, a batch at a time.
func DeleteExpiredRefreshTokens(ctx context.Context, q Querier) (int64, error) {
	tag, err := q.Exec(ctx, `delete from refresh_tokens where token_hash in (
		select token_hash from refresh_tokens where expires_at < now() - interval '1 day' limit 1000)`)
	return tag.RowsAffected(), err
}

// RevokedAccessToken is a row of revoked_access_tokens.
type RevokedAccessToken struct {
	JTI       string
	ExpiresAt time.Time
}

// RevokeAccessToken records the revocation of a client's access token and
// reports whether it was not recorded before.
func RevokeAccessToken(ctx context.Context, q Querier, jti, clientID string, expiresAt time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `insert into revoked_access_tokens (jti, client_id, expires_at) values ($1, $2, $3)
		on conflict (jti) do nothing`, jti, clientID, expiresAt)
	return tag.RowsAffected() == 1, err
}

// AccessTokenRevoked reports whether the access token of jti was revoked.
func AccessTokenRevoked(ctx context.Context, q Querier, jti string) (bool, error) {
	var revoked bool
	err := q.QueryRow(ctx, "select exists (select from revoked_access_tokens where jti = $1)", jti).Scan(&revoked)
	return revoked, err
}

// RevokedAccessTokens returns every revoked access token that has not
// expired, at most limit of them.
func RevokedAccessTokens(ctx context.Context, q Querier, limit int) ([]RevokedAccessToken, error) {
	rows, err := q.Query(ctx, "select jti, expires_at from revoked_access_tokens where expires_at > now() limit $1", limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (RevokedAccessToken, error) {
		var t RevokedAccessToken
		err := r.Scan(&t.JTI, &t.ExpiresAt)
		return t, err
	})
}

// DeleteExpiredRevokedAccessTokens forgets revocations of access tokens
// expired for a minute (clock skew between instances), a batch at a time.
func DeleteExpiredRevokedAccessTokens(ctx context.Context, q Querier) (int64, error) {
	tag, err := q.Exec(ctx, `delete from revoked_access_tokens where jti in (
		select jti from revoked_access_tokens where expires_at < now() - interval '1 minute' limit 1000)`)
	return tag.RowsAffected(), err
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
		return x, ErrNotFound
	}
	return x, err
}

// UpsertExternalClient stores or replaces a mapping.
func UpsertExternalClient(ctx context.Context, q Querier, x ExternalClient) (ExternalClient, error) {
	return scanExternal(q.QueryRow(ctx, `insert into external_clients (issuer, client_id, organization_id, scopes, sandbox)
		values ($1, $2, $3, $4, $5)
		on conflict (issuer, client_id) do update set organization_id = excluded.organization_id,
			scopes = excluded.scopes, sandbox = excluded.sandbox
		returning `+externalColumns, x.Issuer, x.ClientID, x.OrganizationID, x.Scopes, x.Sandbox))
}

// GetExternalClient returns the mapping of one external client.
func GetExternalClient(ctx context.Context, q Querier, issuer, clientID string) (ExternalClient, error) {
	return scanExternal(q.QueryRow(ctx, "select "+externalColumns+" from external_clients where issuer = $1 and client_id = $2", issuer, clientID))
}

// ListExternalClients returns an organization's mappings.
func ListExternalClients(ctx context.Context, q Querier, organizationID string) ([]ExternalClient, error) {
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

// UpdateOrganization replaces an organization's settings and announces the
// change, so that every instance's caches drop what they knew of it.
func UpdateOrganization(ctx context.Context, q Querier, o Organization) (Organization, error) {
	if !isUUID(o.ID) {
		return Organization{}, ErrNotFound
	}
	if o.RedirectOrigins == nil {
		o.RedirectOrigins = []string{}
	}
	row, err := scanOrg(q.QueryRow(ctx, `update organizations set organization_number = $2, reference_prefix = $3,
		redirect_origins = $4 where id = $1 returning `+orgColumns, o.ID, o.OrganizationNumber, o.ReferencePrefix, o.RedirectOrigins))
	if err != nil {
		return row, err
	}
	return row, Notify(ctx, q, "org:"+o.ID)
}

// AuditEntry is a row of audit_log.
type AuditEntry struct {
	ID             int64
	OrganizationID string
	Actor          string
	Action         string
	Target         string
	Detail         string
	At             time.Time
}

// InsertAudit appends an entry to the audit log.
func InsertAudit(ctx context.Context, q Querier, e AuditEntry) error {
	_, err := q.Exec(ctx, `insert into audit_log (organization_id, actor, action, target, detail) values ($1, $2, $3, $4, $5)`,
		e.OrganizationID, e.Actor, e.Action, e.Target, e.Detail)
	return err
}

// AuditLog returns up to limit+1 entries of an organization, newest first,
// older than the entry before when it is not zero.
func AuditLog(ctx context.Context, q Querier, organizationID string, limit int, before int64) ([]AuditEntry, error) {
	rows, err := q.Query(ctx, `select id, organization_id, actor, action, target, detail, at from audit_log
		where organization_id = $1 and ($2 = 0 or id < $2) order by id desc limit $3`, organizationID, before, limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := r.Scan(&e.ID, &e.OrganizationID, &e.Actor, &e.Action, &e.Target, &e.Detail, &e.At)
		return e, err
	})
}
