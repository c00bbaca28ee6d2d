package login

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/modules/identity"
)

// CreateStaff creates a staff account; see identity.StaffService.
func (p *Provider) CreateStaff(ctx context.Context, n identity.NewStaffAccount) (identity.StaffAccount, error) {
	if err := n.Validate(); err != nil {
		return identity.StaffAccount{}, err
	}
	if p.orgs != nil {
		ok, err := p.orgs.OrganizationExists(ctx, n.OrganizationID)
		if err != nil {
			return identity.StaffAccount{}, err
		}
		if !ok {
			return identity.StaffAccount{}, apperr.New(apperr.NotFound, "No organization has the id %q.", n.OrganizationID)
		}
	}
	hash, err := secrethash.Hash(n.Password, p.cfg.PasswordParams)
	if err != nil {
		return identity.StaffAccount{}, err
	}
	return p.store.CreateStaff(ctx, n, hash)
}

// DisableStaff stops an account from signing in; see identity.StaffService.
func (p *Provider) DisableStaff(ctx context.Context, username string) (identity.StaffAccount, error) {
	return p.store.DisableStaff(ctx, username)
}

// ResetStaffPassword sets a new password; see identity.StaffService. It also
// lifts the account's sign-in pause, as an administrator intends.
func (p *Provider) ResetStaffPassword(ctx context.Context, username, password string) (identity.StaffAccount, error) {
	if err := identity.ValidatePassword(password); err != nil {
		return identity.StaffAccount{}, apperr.InvalidFields([]apperr.FieldError{{Field: "password", Message: err.Error()}})
	}
	hash, err := secrethash.Hash(password, p.cfg.PasswordParams)
	if err != nil {
		return identity.StaffAccount{}, err
	}
	a, err := p.store.SetStaffPassword(ctx, username, hash)
	if err != nil {
		return a, err
	}
	return a, p.store.ClearFailures(ctx, accountBucket(username))
}

// StaffByID returns an account; see identity.StaffService.
func (p *Provider) StaffByID(ctx context.Context, id string) (identity.StaffAccount, error) {
	return p.store.StaffByID(ctx, id)
}

// AuthenticateStaff checks a username and password under the rate limit; see
// identity.StaffService. An unknown username costs as much time as a known
// one, and every failure answers alike.
func (p *Provider) AuthenticateStaff(ctx context.Context, username, password, address string) (identity.StaffAccount, error) {
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
		hash = p.dummyHash
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
