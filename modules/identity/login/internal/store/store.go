// Package store is the SQL of interactive login: staff accounts, pending
// authorization requests, codes, userinfo tokens and sign-in attempt counts.
// It returns domain types and knows nothing of HTTP.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
)

// Store reads and writes the tables of migrations/006_login.sql.
type Store struct{ pool *pgxpool.Pool }

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool is the store's pool, for transactions the caller runs.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

const staffColumns = `id::text, organization_id, username, name, role, disabled, created_at, last_login_at`

func scanStaff(row pgx.Row) (identity.StaffAccount, string, error) {
	var a identity.StaffAccount
	var hash string
	err := row.Scan(&a.ID, &a.OrganizationID, &a.Username, &a.Name, &a.Role, &a.Disabled, &a.CreatedAt, &a.LastLoginAt, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, "", identity.ErrStaffNotFound
	}
	return a, hash, database.Classify(err)
}

// CreateStaff inserts an account with its password hash.
func (s *Store) CreateStaff(ctx context.Context, n identity.NewStaffAccount, hash string) (identity.StaffAccount, error) {
	a, _, err := scanStaff(s.pool.QueryRow(ctx, `
		insert into staff_accounts (organization_id, username, name, role, password_hash)
		values ($1, $2, $3, $4, $5)
		returning `+staffColumns+`, password_hash`,
		n.OrganizationID, identity.NormalizeUsername(n.Username), n.Name, string(n.Role), hash))
	if database.IsUniqueViolation(err, "staff_accounts_username_key") {
		return a, identity.ErrStaffExists
	}
	return a, err
}

// StaffByUsername returns an account and its password hash.
func (s *Store) StaffByUsername(ctx context.Context, username string) (identity.StaffAccount, string, error) {
	return scanStaff(s.pool.QueryRow(ctx, `select `+staffColumns+`, password_hash from staff_accounts
		where lower(username) = $1`, identity.NormalizeUsername(username)))
}

// StaffByID returns an account; a malformed id is simply not found.
func (s *Store) StaffByID(ctx context.Context, id string) (identity.StaffAccount, error) {
	a, _, err := scanStaff(s.pool.QueryRow(ctx, `select `+staffColumns+`, password_hash from staff_accounts
		where id::text = $1`, id))
	return a, err
}

// DisableStaffTx marks an account disabled.
func DisableStaffTx(ctx context.Context, tx pgx.Tx, username string) (identity.StaffAccount, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `update staff_accounts set disabled = true, updated_at = now()
		where lower(username) = $1 returning `+staffColumns+`, password_hash`, identity.NormalizeUsername(username)))
	return a, err
}

// SetStaffPasswordTx replaces an account's password hash.
func SetStaffPasswordTx(ctx context.Context, tx pgx.Tx, username, hash string) (identity.StaffAccount, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `update staff_accounts set password_hash = $2, updated_at = now()
		where lower(username) = $1 returning `+staffColumns+`, password_hash`, identity.NormalizeUsername(username), hash))
	return a, err
}

// LockStaffTx returns an account, locked for the transaction.
func LockStaffTx(ctx context.Context, tx pgx.Tx, username string) (identity.StaffAccount, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `select `+staffColumns+`, password_hash from staff_accounts
		where lower(username) = $1 for update`, identity.NormalizeUsername(username)))
	return a, err
}

// SetStaffRoleTx gives an account role.
func SetStaffRoleTx(ctx context.Context, tx pgx.Tx, id string, role identity.Role) (identity.StaffAccount, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `update staff_accounts set role = $2, updated_at = now()
		where id = $1::uuid returning `+staffColumns+`, password_hash`, id, string(role)))
	return a, err
}

// DeleteStaffTx deletes an account and returns it.
func DeleteStaffTx(ctx context.Context, tx pgx.Tx, username string) (identity.StaffAccount, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `delete from staff_accounts where lower(username) = $1
		returning `+staffColumns+`, password_hash`, identity.NormalizeUsername(username)))
	return a, err
}

// RecordStaffLogin notes a successful sign-in, and a rehashed password when given.
func (s *Store) RecordStaffLogin(ctx context.Context, id, newHash string) error {
	_, err := s.pool.Exec(ctx, `update staff_accounts set last_login_at = now(),
		password_hash = coalesce(nullif($2, ''), password_hash) where id::text = $1`, id, newHash)
	return database.Classify(err)
}

// Request is a pending authorization request while the person signs in.
type Request struct {
	ID            string
	BrowserHash   []byte
	ClientID      string
	RedirectURI   string
	Scope         string
	State         string
	Nonce         string
	CodeChallenge string
	Method        string
	ExpiresAt     time.Time
}

// CreateRequest stores r and, in passing, removes long-expired requests.
func (s *Store) CreateRequest(ctx context.Context, r Request) error {
	_, err := s.pool.Exec(ctx, `insert into login_requests
		(id, browser_hash, client_id, redirect_uri, scope, state, nonce, code_challenge, method, expires_at)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		r.ID, r.BrowserHash, r.ClientID, r.RedirectURI, r.Scope, r.State, r.Nonce, r.CodeChallenge, r.Method, r.ExpiresAt)
	if err != nil {
		return database.Classify(err)
	}
	_, err = s.pool.Exec(ctx, `delete from login_requests where expires_at < now() - interval '1 hour'`)
	return database.Classify(err)
}

// RequestByID returns an unexpired pending request.
func (s *Store) RequestByID(ctx context.Context, id string) (Request, bool, error) {
	var r Request
	err := s.pool.QueryRow(ctx, `select id, browser_hash, client_id, redirect_uri, scope, state, nonce,
		code_challenge, method, expires_at from login_requests where id = $1 and expires_at > now()`, id).
		Scan(&r.ID, &r.BrowserHash, &r.ClientID, &r.RedirectURI, &r.Scope, &r.State, &r.Nonce, &r.CodeChallenge, &r.Method, &r.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, database.Classify(err)
}

// Code is an authorization code, stored by the hash of its value.
type Code struct {
	Hash          []byte
	ClientID      string
	RedirectURI   string
	CodeChallenge string
	Scope         string
	Claims        []byte // encrypted
	ExpiresAt     time.Time
	UsedAt        *time.Time
}

// IssueCodeTx stores a code and deletes the request it completes, if any.
func (s *Store) IssueCodeTx(ctx context.Context, tx pgx.Tx, c Code, requestID string) error {
	if requestID != "" {
		tag, err := tx.Exec(ctx, `delete from login_requests where id = $1 and expires_at > now()`, requestID)
		if err != nil {
			return database.Classify(err)
		}
		if tag.RowsAffected() == 0 {
			return ErrRequestGone
		}
	}
	_, err := tx.Exec(ctx, `insert into login_codes (code_hash, client_id, redirect_uri, code_challenge, scope, claims, expires_at)
		values ($1, $2, $3, $4, $5, $6, $7)`, c.Hash, c.ClientID, c.RedirectURI, c.CodeChallenge, c.Scope, c.Claims, c.ExpiresAt)
	if err != nil {
		return database.Classify(err)
	}
	// Codes are kept an hour past use so that a replay is recognized and
	// revokes what the code issued; then they go.
	_, err = tx.Exec(ctx, `delete from login_codes where expires_at < now() - interval '1 hour'`)
	return database.Classify(err)
}

// ErrRequestGone: the pending request was completed already or expired.
var ErrRequestGone = errors.New("login request gone")

// LockCodeTx returns the code with hash, locked for the transaction.
func (s *Store) LockCodeTx(ctx context.Context, tx pgx.Tx, hash []byte) (Code, bool, error) {
	var c Code
	err := tx.QueryRow(ctx, `select code_hash, client_id, redirect_uri, code_challenge, scope, claims, expires_at, used_at
		from login_codes where code_hash = $1 for update`, hash).
		Scan(&c.Hash, &c.ClientID, &c.RedirectURI, &c.CodeChallenge, &c.Scope, &c.Claims, &c.ExpiresAt, &c.UsedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	return c, err == nil, database.Classify(err)
}

// MarkCodeUsedTx records that a code was presented.
func (s *Store) MarkCodeUsedTx(ctx context.Context, tx pgx.Tx, hash []byte) error {
	_, err := tx.Exec(ctx, `update login_codes set used_at = now() where code_hash = $1 and used_at is null`, hash)
	return database.Classify(err)
}

// RevokeTokensOfCodeTx revokes every access token a code issued.
func (s *Store) RevokeTokensOfCodeTx(ctx context.Context, tx pgx.Tx, hash []byte) error {
	_, err := tx.Exec(ctx, `update login_access_tokens set revoked_at = now() where code_hash = $1 and revoked_at is null`, hash)
	return database.Classify(err)
}

// AccessToken is an opaque token for /oauth/userinfo.
type AccessToken struct {
	Hash      []byte
	CodeHash  []byte
	ClientID  string
	Claims    []byte // encrypted
	ExpiresAt time.Time
}

// InsertAccessTokenTx stores a token.
func (s *Store) InsertAccessTokenTx(ctx context.Context, tx pgx.Tx, t AccessToken) error {
	_, err := tx.Exec(ctx, `insert into login_access_tokens (token_hash, code_hash, client_id, claims, expires_at)
		values ($1, $2, $3, $4, $5)`, t.Hash, t.CodeHash, t.ClientID, t.Claims, t.ExpiresAt)
	return database.Classify(err)
}

// ActiveAccessToken returns a token that is neither expired nor revoked.
func (s *Store) ActiveAccessToken(ctx context.Context, hash []byte) (AccessToken, bool, error) {
	var t AccessToken
	err := s.pool.QueryRow(ctx, `select token_hash, code_hash, client_id, claims, expires_at from login_access_tokens
		where token_hash = $1 and expires_at > now() and revoked_at is null`, hash).
		Scan(&t.Hash, &t.CodeHash, &t.ClientID, &t.Claims, &t.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, false, nil
	}
	return t, err == nil, database.Classify(err)
}

// BlockedFor returns how long the first of buckets is still blocked, or 0.
func (s *Store) BlockedFor(ctx context.Context, buckets ...string) (time.Duration, error) {
	var secs float64
	err := s.pool.QueryRow(ctx, `select coalesce(max(extract(epoch from blocked_until - now())), 0)::float8
		from login_attempts where bucket = any($1) and blocked_until > now()`, buckets).Scan(&secs)
	return time.Duration(secs * float64(time.Second)), database.Classify(err)
}

// RecordFailure counts a failure in bucket's window and blocks the bucket
// until the window ends once limit failures are reached.
func (s *Store) RecordFailure(ctx context.Context, bucket string, limit int, window time.Duration) error {
	_, err := s.pool.Exec(ctx, `
		insert into login_attempts (bucket, failures, window_started_at) values ($1, 1, now())
		on conflict (bucket) do update set
			failures = case when login_attempts.window_started_at < now() - $2::interval then 1 else login_attempts.failures + 1 end,
			window_started_at = case when login_attempts.window_started_at < now() - $2::interval then now() else login_attempts.window_started_at end`,
		bucket, window)
	if err != nil {
		return database.Classify(err)
	}
	_, err = s.pool.Exec(ctx, `update login_attempts set blocked_until = window_started_at + $3::interval
		where bucket = $1 and failures >= $2`, bucket, limit, window)
	if err != nil {
		return database.Classify(err)
	}
	// Counts of windows long past are forgotten.
	_, err = s.pool.Exec(ctx, `delete from login_attempts where window_started_at < now() - interval '1 day'
		and (blocked_until is null or blocked_until < now())`)
	return database.Classify(err)
}

// ClearFailures forgets an account's failures after a successful sign-in.
func (s *Store) ClearFailures(ctx context.Context, bucket string) error {
	_, err := s.pool.Exec(ctx, `delete from login_attempts where bucket = $1`, bucket)
	return database.Classify(err)
}
