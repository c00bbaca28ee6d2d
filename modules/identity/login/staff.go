package login

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/login/internal/store"
)

// Staff manages staff accounts and checks their passwords (identity.StaffService).
type Staff struct {
	store     *store.Store
	orgs      Organizations
	cfg       StaffConfig
	dummyOnce sync.Once
	dummyHash string
}

// StaffConfig holds the costs and limits of staff passwords.
type StaffConfig struct {
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

var _ identity.StaffService = (*Staff)(nil)

// NewStaff returns the staff service; orgs tells whether an account's
// organization exists.
func NewStaff(pool *pgxpool.Pool, orgs Organizations, cfg StaffConfig) (*Staff, error) {
	if pool == nil || orgs == nil {
		return nil, errors.New("login: NewStaff needs a pool and Organizations")
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
	return &Staff{store: store.New(pool), orgs: orgs, cfg: cfg}, nil
}

// dummy is a hash to verify against when the username is unknown, so that
// an unknown username costs as much time as a wrong password. It is made on
// first use: commands that never authenticate do not pay for it.
func (p *Staff) dummy() string {
	p.dummyOnce.Do(func() {
		p.dummyHash, _ = secrethash.Hash(randomToken(), p.cfg.PasswordParams)
	})
	return p.dummyHash
}

// CreateStaff creates a staff account; see identity.StaffService.
func (p *Staff) CreateStaff(ctx context.Context, n identity.NewStaffAccount) (identity.StaffAccount, error) {
	if err := n.Validate(); err != nil {
		return identity.StaffAccount{}, err
	}
	ok, err := p.orgs.OrganizationExists(ctx, n.OrganizationID)
	if err != nil {
		return identity.StaffAccount{}, err
	}
	if !ok {
		return identity.StaffAccount{}, apperr.New(apperr.NotFound, "No organization has the id %q.", n.OrganizationID)
	}
	hash, err := secrethash.Hash(n.Password, p.cfg.PasswordParams)
	if err != nil {
		return identity.StaffAccount{}, err
	}
	return p.store.CreateStaff(ctx, n, hash)
}

// DisableStaff stops an account from signing in; see identity.StaffService.
func (p *Staff) DisableStaff(ctx context.Context, username string, before ...database.BeforeCommit[identity.StaffChange]) (identity.StaffChange, error) {
	return p.change(ctx, before, func(tx pgx.Tx) (identity.StaffAccount, error) { return store.DisableStaffTx(ctx, tx, username) })
}

// ResetStaffPassword sets a new password; see identity.StaffService. It also
// lifts the account's sign-in pause, as an administrator intends.
func (p *Staff) ResetStaffPassword(ctx context.Context, username, password string, before ...database.BeforeCommit[identity.StaffChange]) (identity.StaffChange, error) {
	if err := identity.ValidatePassword(password); err != nil {
		return identity.StaffChange{}, apperr.InvalidFields([]apperr.FieldError{{Field: "password", Message: err.Error()}})
	}
	hash, err := secrethash.Hash(password, p.cfg.PasswordParams)
	if err != nil {
		return identity.StaffChange{}, err
	}
	ch, err := p.change(ctx, before, func(tx pgx.Tx) (identity.StaffAccount, error) {
		return store.SetStaffPasswordTx(ctx, tx, username, hash)
	})
	if err != nil {
		return ch, err
	}
	return ch, p.store.ClearFailures(ctx, accountBucket(username))
}

// SetStaffRole gives an account another role; see identity.StaffService.
func (p *Staff) SetStaffRole(ctx context.Context, username string, role identity.Role, before ...database.BeforeCommit[identity.StaffChange]) (identity.StaffChange, error) {
	if !role.Valid() {
		return identity.StaffChange{}, apperr.InvalidFields([]apperr.FieldError{{Field: "role", Message: "must be admin or viewer"}})
	}
	var ch identity.StaffChange
	err := database.WithTx(ctx, p.store.Pool(), func(tx pgx.Tx) error {
		a, err := store.LockStaffTx(ctx, tx, username)
		if err != nil || a.Role == role {
			ch.Account = a
			return err
		}
		if ch.Account, err = store.SetStaffRoleTx(ctx, tx, a.ID, role); err != nil {
			return err
		}
		if ch.Ended, err = store.EndStaffSessionsTx(ctx, tx, a.ID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, ch, before)
	})
	if err != nil {
		return identity.StaffChange{}, err
	}
	return ch, nil
}

// DeleteStaff deletes an account with its sessions; see identity.StaffService.
func (p *Staff) DeleteStaff(ctx context.Context, username string, before ...database.BeforeCommit[identity.StaffChange]) (identity.StaffChange, error) {
	var ch identity.StaffChange
	err := database.WithTx(ctx, p.store.Pool(), func(tx pgx.Tx) error {
		a, err := store.LockStaffTx(ctx, tx, username)
		if err != nil {
			return err
		}
		// The sessions go first, so that the change names each one ended.
		if ch.Ended, err = store.EndStaffSessionsTx(ctx, tx, a.ID); err != nil {
			return err
		}
		if ch.Account, err = store.DeleteStaffTx(ctx, tx, username); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, ch, before)
	})
	if err != nil {
		return identity.StaffChange{}, err
	}
	return ch, nil
}

// StaffSessions returns an account and its sessions; see identity.StaffService.
func (p *Staff) StaffSessions(ctx context.Context, username string) (identity.StaffAccount, []identity.Session, error) {
	a, _, err := p.store.StaffByUsername(ctx, username)
	if err != nil {
		return a, nil, err
	}
	sessions, err := store.StaffSessions(ctx, p.store.Pool(), a.ID)
	return a, sessions, err
}

// EndStaffSessions ends every session of an account; see identity.StaffService.
func (p *Staff) EndStaffSessions(ctx context.Context, username string, before ...database.BeforeCommit[identity.StaffChange]) (identity.StaffChange, error) {
	return p.change(ctx, before, func(tx pgx.Tx) (identity.StaffAccount, error) { return store.LockStaffTx(ctx, tx, username) })
}

// change runs do on an account, then ends the account's sessions and runs
// before, all in one transaction.
func (p *Staff) change(ctx context.Context, before []database.BeforeCommit[identity.StaffChange], do func(pgx.Tx) (identity.StaffAccount, error)) (identity.StaffChange, error) {
	var ch identity.StaffChange
	err := database.WithTx(ctx, p.store.Pool(), func(tx pgx.Tx) error {
		var err error
		if ch.Account, err = do(tx); err != nil {
			return err
		}
		if ch.Ended, err = store.EndStaffSessionsTx(ctx, tx, ch.Account.ID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, ch, before)
	})
	if err != nil {
		return identity.StaffChange{}, err
	}
	return ch, nil
}

// StaffByID returns an account; see identity.StaffService.
func (p *Staff) StaffByID(ctx context.Context, id string) (identity.StaffAccount, error) {
	return p.store.StaffByID(ctx, id)
}

// AuthenticateStaff checks a username and password under the rate limit; see
// identity.StaffService. An unknown username costs as much time as a known
// one, and every failure answers alike.
func (p *Staff) AuthenticateStaff(ctx context.Context, username, password, address string) (identity.StaffAccount, error) {
	acct, addr := accountBucket(username), "address:"+address
	wait, err := p.store.BlockedFor(ctx, acct, addr)
	if err != nil {
		return identity.StaffAccount{}, err
	}
	if wait > 0 {
		return identity.StaffAccount{}, tooManyAttempts(wait)
	}
	a, hash, err := p.store.StaffByUsername(ctx, username)
	found := err == nil
	if err != nil && !errors.Is(err, identity.ErrStaffNotFound) {
		return identity.StaffAccount{}, err
	}
	if !found || len(password) > identity.MaxPasswordLength {
		hash = p.dummy()
	}
	ok, verr := secrethash.Verify(password, hash)
	if !found || !ok || verr != nil || a.Disabled {
		if err := p.store.RecordFailure(ctx, acct, p.cfg.AccountLimit, p.cfg.LimitWindow); err != nil {
			return identity.StaffAccount{}, err
		}
		if err := p.store.RecordFailure(ctx, addr, p.cfg.AddressLimit, p.cfg.LimitWindow); err != nil {
			return identity.StaffAccount{}, err
		}
		return identity.StaffAccount{}, identity.ErrBadCredentials
	}
	rehash := ""
	if secrethash.NeedsRehash(hash, p.cfg.PasswordParams) {
		rehash, _ = secrethash.Hash(password, p.cfg.PasswordParams)
	}
	if err := p.store.RecordStaffLogin(ctx, a.ID, rehash); err != nil {
		return identity.StaffAccount{}, err
	}
	return a, p.store.ClearFailures(ctx, acct)
}

func accountBucket(username string) string {
	return "account:" + hex.EncodeToString(hashOf(identity.NormalizeUsername(username)))[:40]
}

func tooManyAttempts(wait time.Duration) error {
	if wait < time.Second {
		wait = time.Second
	}
	return &apperr.Error{Code: apperr.RateLimited, Message: identity.ErrTooManyAttempts.Message,
		RetryAfter: wait, Err: identity.ErrTooManyAttempts}
}
