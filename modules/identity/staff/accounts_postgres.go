package staff

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/identity/internal/secret"
	"github.com/flowd/flowd/modules/identity/staff/internal/store"
)

// AccountService manages staff accounts and checks their passwords (Accounts).
type AccountService struct {
	store     *store.Store
	orgs      Organizations
	cfg       Config
	dummyOnce sync.Once
	dummyHash string
}

// Config holds the costs and limits of staff passwords.
type Config struct {
	// PasswordParams are argon2id's costs: secrethash.Default in production,
	// secrethash.Cheap in tests.
	PasswordParams secrethash.Params
	// Password guessing: after AccountLimit failures for one username, or
	// AddressLimit from one address, within LimitWindow, sign-in pauses
	// until the window ends. Zero means 5, 50 and 15m.
	AccountLimit int
	AddressLimit int
	LimitWindow  time.Duration
}

var _ Accounts = (*AccountService)(nil)

// NewAccounts returns the staff accounts on pool; orgs tells whether an
// account's organization exists.
func NewAccounts(pool *pgxpool.Pool, orgs Organizations, cfg Config) (*AccountService, error) {
	if pool == nil || orgs == nil {
		return nil, errors.New("staff: NewAccounts needs a pool and Organizations")
	}
	if cfg.PasswordParams == (secrethash.Params{}) {
		cfg.PasswordParams = secrethash.Default
	}
	if cfg.LimitWindow <= 0 {
		cfg.LimitWindow = 15 * time.Minute
	}
	if cfg.AccountLimit <= 0 {
		cfg.AccountLimit = 5
	}
	if cfg.AddressLimit <= 0 {
		cfg.AddressLimit = 50
	}
	if err := cfg.PasswordParams.Validate(); err != nil {
		return nil, err
	}
	return &AccountService{store: store.New(pool), orgs: orgs, cfg: cfg}, nil
}

// dummy is a hash to verify against when the username is unknown, so that
// an unknown username costs as much time as a wrong password. It is made on
// first use: commands that never authenticate do not pay for it.
func (p *AccountService) dummy() string {
	p.dummyOnce.Do(func() {
		p.dummyHash, _ = secrethash.Hash(secret.Random("", 32), p.cfg.PasswordParams)
	})
	return p.dummyHash
}

// CreateStaff creates a staff account; see Accounts.
func (p *AccountService) CreateStaff(ctx context.Context, n NewAccount) (Account, error) {
	if err := n.Validate(); err != nil {
		return Account{}, err
	}
	ok, err := p.orgs.OrganizationExists(ctx, n.OrganizationID)
	if err != nil {
		return Account{}, err
	}
	if !ok {
		return Account{}, apperr.New(apperr.NotFound, "No organization has the id %q.", n.OrganizationID)
	}
	hash, err := secrethash.Hash(n.Password, p.cfg.PasswordParams)
	if err != nil {
		return Account{}, err
	}
	row, err := p.store.CreateStaff(ctx, store.Account{OrganizationID: n.OrganizationID, Username: NormalizeUsername(n.Username),
		Name: n.Name, Role: string(n.Role)}, hash)
	return toAccount(row), accountErr(err)
}

// DisableStaff stops an account from signing in; see Accounts.
func (p *AccountService) DisableStaff(ctx context.Context, username string, before ...database.BeforeCommit[Change]) (Change, error) {
	return p.change(ctx, before, func(tx pgx.Tx) (store.Account, error) {
		return store.DisableStaffTx(ctx, tx, NormalizeUsername(username))
	})
}

// ResetStaffPassword sets a new password; see Accounts. It also
// lifts the account's sign-in pause, as an administrator intends.
func (p *AccountService) ResetStaffPassword(ctx context.Context, username, password string, before ...database.BeforeCommit[Change]) (Change, error) {
	if err := ValidatePassword(password); err != nil {
		return Change{}, apperr.InvalidFields([]apperr.FieldError{{Field: "password", Message: err.Error()}})
	}
	hash, err := secrethash.Hash(password, p.cfg.PasswordParams)
	if err != nil {
		return Change{}, err
	}
	ch, err := p.change(ctx, before, func(tx pgx.Tx) (store.Account, error) {
		return store.SetStaffPasswordTx(ctx, tx, NormalizeUsername(username), hash)
	})
	if err != nil {
		return ch, err
	}
	return ch, p.store.ClearFailures(ctx, accountBucket(username))
}

// SetStaffRole gives an account another role; see Accounts.
func (p *AccountService) SetStaffRole(ctx context.Context, username string, role Role, before ...database.BeforeCommit[Change]) (Change, error) {
	if !role.Valid() {
		return Change{}, apperr.InvalidFields([]apperr.FieldError{{Field: "role", Message: "must be admin or viewer"}})
	}
	var ch Change
	err := database.WithTx(ctx, p.store.Pool(), func(tx pgx.Tx) error {
		a, err := store.LockStaffTx(ctx, tx, NormalizeUsername(username))
		if err != nil || Role(a.Role) == role {
			ch.Account = toAccount(a)
			return err
		}
		if a, err = store.SetStaffRoleTx(ctx, tx, a.ID, string(role)); err != nil {
			return err
		}
		ch.Account = toAccount(a)
		if ch.Ended, err = endStaffSessions(ctx, tx, a.ID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, ch, before)
	})
	if err != nil {
		return Change{}, accountErr(err)
	}
	return ch, nil
}

// DeleteStaff deletes an account with its sessions; see Accounts.
func (p *AccountService) DeleteStaff(ctx context.Context, username string, before ...database.BeforeCommit[Change]) (Change, error) {
	var ch Change
	err := database.WithTx(ctx, p.store.Pool(), func(tx pgx.Tx) error {
		a, err := store.LockStaffTx(ctx, tx, NormalizeUsername(username))
		if err != nil {
			return err
		}
		// The sessions go first, so that the change names each one ended.
		if ch.Ended, err = endStaffSessions(ctx, tx, a.ID); err != nil {
			return err
		}
		if a, err = store.DeleteStaffTx(ctx, tx, NormalizeUsername(username)); err != nil {
			return err
		}
		ch.Account = toAccount(a)
		return database.RunBeforeCommit(ctx, tx, ch, before)
	})
	if err != nil {
		return Change{}, accountErr(err)
	}
	return ch, nil
}

// StaffSessions returns an account and its sessions; see Accounts.
func (p *AccountService) StaffSessions(ctx context.Context, username string) (Account, []Session, error) {
	a, _, err := p.store.StaffByUsername(ctx, NormalizeUsername(username))
	if err != nil {
		return toAccount(a), nil, accountErr(err)
	}
	rows, err := store.StaffSessions(ctx, p.store.Pool(), a.ID)
	return toAccount(a), toSessions(rows), err
}

// EndStaffSessions ends every session of an account; see Accounts.
func (p *AccountService) EndStaffSessions(ctx context.Context, username string, before ...database.BeforeCommit[Change]) (Change, error) {
	return p.change(ctx, before, func(tx pgx.Tx) (store.Account, error) { return store.LockStaffTx(ctx, tx, NormalizeUsername(username)) })
}

// change runs do on an account, then ends the account's sessions and runs
// before, all in one transaction.
func (p *AccountService) change(ctx context.Context, before []database.BeforeCommit[Change], do func(pgx.Tx) (store.Account, error)) (Change, error) {
	var ch Change
	err := database.WithTx(ctx, p.store.Pool(), func(tx pgx.Tx) error {
		a, err := do(tx)
		if err != nil {
			return err
		}
		ch.Account = toAccount(a)
		if ch.Ended, err = endStaffSessions(ctx, tx, a.ID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, ch, before)
	})
	if err != nil {
		return Change{}, accountErr(err)
	}
	return ch, nil
}

// StaffByID returns an account; see Accounts.
func (p *AccountService) StaffByID(ctx context.Context, id string) (Account, error) {
	a, err := p.store.StaffByID(ctx, id)
	return toAccount(a), accountErr(err)
}

// AuthenticateStaff checks a username and password under the rate limit; see
// Accounts. An unknown username costs as much time as a known
// one, and every failure answers alike.
func (p *AccountService) AuthenticateStaff(ctx context.Context, username, password, address string) (Account, error) {
	acct, addr := accountBucket(username), "address:"+address
	wait, err := p.store.BlockedFor(ctx, acct, addr)
	if err != nil {
		return Account{}, err
	}
	if wait > 0 {
		return Account{}, tooManyAttempts(wait)
	}
	a, hash, err := p.store.StaffByUsername(ctx, NormalizeUsername(username))
	found := err == nil
	if err != nil && !errors.Is(err, database.ErrNotFound) {
		return Account{}, err
	}
	if !found || len(password) > MaxPasswordLength {
		hash = p.dummy()
	}
	ok, verr := secrethash.Verify(password, hash)
	if !found || !ok || verr != nil || a.Disabled {
		if err := p.store.RecordFailure(ctx, acct, p.cfg.AccountLimit, p.cfg.LimitWindow); err != nil {
			return Account{}, err
		}
		if err := p.store.RecordFailure(ctx, addr, p.cfg.AddressLimit, p.cfg.LimitWindow); err != nil {
			return Account{}, err
		}
		return Account{}, ErrBadCredentials
	}
	rehash := ""
	if secrethash.NeedsRehash(hash, p.cfg.PasswordParams) {
		rehash, _ = secrethash.Hash(password, p.cfg.PasswordParams)
	}
	if err := p.store.RecordStaffLogin(ctx, a.ID, rehash); err != nil {
		return Account{}, err
	}
	return toAccount(a), p.store.ClearFailures(ctx, acct)
}

func accountBucket(username string) string {
	sum := sha256.Sum256([]byte(NormalizeUsername(username)))
	return "account:" + hex.EncodeToString(sum[:])[:40]
}

func tooManyAttempts(wait time.Duration) error {
	if wait < time.Second {
		wait = time.Second
	}
	return &apperr.Error{Code: apperr.RateLimited, Message: ErrTooManyAttempts.Message,
		RetryAfter: wait, Err: ErrTooManyAttempts}
}

// toAccount is a row as the domain knows it.
func toAccount(a store.Account) Account {
	return Account{ID: a.ID, OrganizationID: a.OrganizationID, Username: a.Username, Name: a.Name, Role: Role(a.Role),
		Disabled: a.Disabled, CreatedAt: a.CreatedAt, LastLoginAt: a.LastLoginAt}
}

// accountErr is the store's error in the domain's words.
func accountErr(err error) error {
	switch {
	case errors.Is(err, database.ErrNotFound):
		return ErrAccountNotFound
	case errors.Is(err, store.ErrExists):
		return ErrAccountExists
	}
	return err
}
