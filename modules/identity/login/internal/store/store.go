// Package store is the SQL of interactive login: pending authorization
// requests, codes and userinfo tokens. It knows nothing of HTTP.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
)

// Store reads and writes login_requests, login_codes and login_access_tokens.
type Store struct{ pool *pgxpool.Pool }

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool is the store's pool, for transactions the caller runs.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

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
