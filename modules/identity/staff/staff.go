// Package staff is identity's part that keeps staff accounts, the people of
// an organization who sign in to the console through the built-in OpenID
// provider (whose interactive side is modules/identity/login), and the
// records of sessions the server can end: the console's, the provider's and
// the consent pages'.
package staff

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/fieldcheck"
)

// Role is what a staff member may do in the console.
type Role string

// The roles of staff: a viewer sees, an admin also changes.
const (
	RoleViewer Role = "viewer"
	RoleAdmin  Role = "admin"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleViewer || r == RoleAdmin }

// Account is a person of an organization who signs in to the console
// with a username (often an e-mail address) and a password.
type Account struct {
	ID             string
	OrganizationID string
	Username       string
	Name           string
	Role           Role
	Disabled       bool
	CreatedAt      time.Time
	LastLoginAt    *time.Time
}

// NewAccount is what creating a staff account takes.
type NewAccount struct {
	OrganizationID string
	Username       string
	Name           string
	Role           Role
	Password       string
}

// Password length limits: long enough to resist guessing behind the rate
// limit, short enough that hashing cannot be abused.
const (
	MinPasswordLength = 12
	MaxPasswordLength = 256
)

// NormalizeUsername trims a username and folds it to lower case; usernames
// are unique and matched without regard to case.
func NormalizeUsername(u string) string { return strings.ToLower(strings.TrimSpace(u)) }

// Validate names every invalid field of n.
func (n NewAccount) Validate() error {
	var f apperr.Fields
	if strings.TrimSpace(n.OrganizationID) == "" || len(n.OrganizationID) > 64 {
		f.Add("org", "must be an organization id")
	}
	if err := ValidateUsername(n.Username); err != nil {
		f.Add("username", "%s", err.Error())
	}
	if len(n.Name) > 200 {
		f.Add("name", "must be at most 200 characters")
	} else if msg := fieldcheck.Text(n.Name, 200); msg != "" {
		f.Add("name", "%s", msg)
	}
	if !n.Role.Valid() {
		f.Add("role", "must be admin or viewer")
	}
	if err := ValidatePassword(n.Password); err != nil {
		f.Add("password", "%s", err.Error())
	}
	return f.Err()
}

// ValidateUsername checks a username: 1–254 letters, digits and . _ - @ +.
func ValidateUsername(u string) error {
	u = NormalizeUsername(u)
	if u == "" || len(u) > 254 {
		return errors.New("must be 1 to 254 characters")
	}
	for _, r := range u {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-@+", r)) {
			return errors.New("may hold only letters, digits and . _ - @ +")
		}
	}
	return nil
}

// ValidatePassword checks a new password's length.
func ValidatePassword(p string) error {
	n := len([]rune(p))
	if n < MinPasswordLength || len(p) > MaxPasswordLength {
		return errors.New("must be 12 to 256 characters")
	}
	return nil
}

// Errors of staff accounts.
var (
	// ErrAccountNotFound: no account has this username.
	ErrAccountNotFound = apperr.New(apperr.NotFound, "No staff account has this username.")
	// ErrAccountExists: the username is taken.
	ErrAccountExists = apperr.New(apperr.Conflict, "A staff account with this username exists already.")
	// ErrBadCredentials: the username or the password is wrong, or the
	// account is disabled; deliberately not saying which.
	ErrBadCredentials = apperr.New(apperr.Unauthenticated, "The username or password is not right.")
	// ErrTooManyAttempts: sign-in is paused for this account or address.
	ErrTooManyAttempts = apperr.New(apperr.RateLimited, "Too many failed attempts. Wait a while and try again.")
)

// Change is an account as a change left it (as it was, for a deletion)
// and the sessions the change ended.
type Change struct {
	Account Account
	Ended   []Session
}

// Accounts manages staff accounts; the CLI and the built-in provider use
// it. A change that may have been made because an account was misused (a
// disable, a password reset, a role change, a deletion) ends every session
// of the account, at the console and at the provider, in the change's
// transaction; before runs there too, with the change (see
// database.BeforeCommit), and its error undoes the change.
type Accounts interface {
	// CreateStaff creates an account. Errors: apperr Invalid (fields),
	// ErrAccountExists, apperr NotFound for an unknown organization.
	CreateStaff(ctx context.Context, n NewAccount) (Account, error)
	// DisableStaff stops an account from signing in and ends its sessions.
	// Errors: ErrAccountNotFound.
	DisableStaff(ctx context.Context, username string, before ...database.BeforeCommit[Change]) (Change, error)
	// ResetStaffPassword sets a new password (and enables nothing else) and
	// ends the account's sessions. Errors: apperr Invalid, ErrAccountNotFound.
	ResetStaffPassword(ctx context.Context, username, password string, before ...database.BeforeCommit[Change]) (Change, error)
	// SetStaffRole gives an account another role and ends its sessions; the
	// role it has already changes nothing and ends nothing. Errors: apperr
	// Invalid, ErrAccountNotFound.
	SetStaffRole(ctx context.Context, username string, role Role, before ...database.BeforeCommit[Change]) (Change, error)
	// DeleteStaff deletes an account with its sessions. Errors: ErrAccountNotFound.
	DeleteStaff(ctx context.Context, username string, before ...database.BeforeCommit[Change]) (Change, error)
	// StaffSessions returns an account and its sessions, newest first,
	// including those timed out but not yet swept. Errors: ErrAccountNotFound.
	StaffSessions(ctx context.Context, username string) (Account, []Session, error)
	// EndStaffSessions ends every session of an account. Errors: ErrAccountNotFound.
	EndStaffSessions(ctx context.Context, username string, before ...database.BeforeCommit[Change]) (Change, error)
	// AuthenticateStaff checks a username and password from address, under the
	// rate limit. Errors: ErrBadCredentials, ErrTooManyAttempts (with RetryAfter).
	AuthenticateStaff(ctx context.Context, username, password, address string) (Account, error)
	// StaffByID returns an account. Errors: ErrAccountNotFound.
	StaffByID(ctx context.Context, id string) (Account, error)
}

// Organizations tells whether an organization exists (orgs.Organizations
// offers it): a staff account belongs to one.
type Organizations interface {
	OrganizationExists(ctx context.Context, id string) (bool, error)
}
