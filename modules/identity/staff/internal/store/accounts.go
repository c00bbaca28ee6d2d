// Package store is the SQL of staff accounts and sessions: the
// staff_accounts, login_attempts and login_sessions tables. Usernames come
// normalized (staff.NormalizeUsername).
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
)

// Store reads and writes staff accounts and sign-in attempts.
type Store struct{ pool *pgxpool.Pool }

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool is the store's pool, for transactions the caller runs.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

const staffColumns = `id::text, organization_id, username, name, role, disabled, created_at, last_login_at`

// Account is a row of staff_accounts, without its password hash.
type Account struct {
	ID             string
	OrganizationID string
	Username       string
	Name           string
	Role           string
	Disabled       bool
	CreatedAt      time.Time
	LastLoginAt    *time.Time
}

// ErrExists means the username is taken.
var ErrExists = errors.New("store: the username is taken")

func scanStaff(row pgx.Row) (Account, string, error) {
	var a Account
	var hash string
	err := row.Scan(&a.ID, &a.OrganizationID, &a.Username, &a.Name, &a.Role, &a.Disabled, &a.CreatedAt, &a.LastLoginAt, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, "", database.ErrNotFound
	}
	return a, hash, database.Classify(err)
}

// CreateStaff inserts an account with its password hash; a, with its
// username normalized, gives the rest.
func (s *Store) CreateStaff(ctx context.Context, a Account, hash string) (Account, error) {
	a, _, err := scanStaff(s.pool.QueryRow(ctx, `
		insert into staff_accounts (organization_id, username, name, role, password_hash)
		values ($1, $2, $3, $4, $5)
		returning `+staffColumns+`, password_hash`,
		a.OrganizationID, a.Username, a.Name, a.Role, hash))
	if database.IsUniqueViolation(err, "staff_accounts_username_key") {
		return a, ErrExists
	}
	return a, err
}

// StaffByUsername returns an account and its password hash.
func (s *Store) StaffByUsername(ctx context.Context, username string) (Account, string, error) {
	return scanStaff(s.pool.QueryRow(ctx, `select `+staffColumns+`, password_hash from staff_accounts
		where lower(username) = $1`, username))
}

// StaffByID returns an account; a malformed id is simply not found.
func (s *Store) StaffByID(ctx context.Context, id string) (Account, error) {
	a, _, err := scanStaff(s.pool.QueryRow(ctx, `select `+staffColumns+`, password_hash from staff_accounts
		where id::text = $1`, id))
	return a, err
}

// DisableStaffTx marks an account disabled.
func DisableStaffTx(ctx context.Context, tx pgx.Tx, username string) (Account, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `update staff_accounts set disabled = true, updated_at = now()
		where lower(username) = $1 returning `+staffColumns+`, password_hash`, username))
	return a, err
}

// SetStaffPasswordTx replaces an account's password hash.
func SetStaffPasswordTx(ctx context.Context, tx pgx.Tx, username, hash string) (Account, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `update staff_accounts set password_hash = $2, updated_at = now()
		where lower(username) = $1 returning `+staffColumns+`, password_hash`, username, hash))
	return a, err
}

// LockStaffTx returns an account, locked for the transaction.
func LockStaffTx(ctx context.Context, tx pgx.Tx, username string) (Account, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `select `+staffColumns+`, password_hash from staff_accounts
		where lower(username) = $1 for update`, username))
	return a, err
}

// SetStaffRoleTx gives an account role.
func SetStaffRoleTx(ctx context.Context, tx pgx.Tx, id, role string) (Account, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `update staff_accounts set role = $2, updated_at = now()
		where id = $1::uuid returning `+staffColumns+`, password_hash`, id, role))
	return a, err
}

// DeleteStaffTx deletes an account and returns it.
func DeleteStaffTx(ctx context.Context, tx pgx.Tx, username string) (Account, error) {
	a, _, err := scanStaff(tx.QueryRow(ctx, `delete from staff_accounts where lower(username) = $1
		returning `+staffColumns+`, password_hash`, username))
	return a, err
}

// RecordStaffLogin notes a successful sign-in, and a rehashed password when given.
func (s *Store) RecordStaffLogin(ctx context.Context, id, newHash string) error {
	_, err := s.pool.Exec(ctx, `update staff_accounts set last_login_at = now(),
		password_hash = coalesce(nullif($2, ''), password_hash) where id::text = $1`, id, newHash)
	return database.Classify(err)
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
