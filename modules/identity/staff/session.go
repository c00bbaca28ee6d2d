package staff

import (
	"context"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
)

// The sessions the server can end: each signed-in browser has a row, and a
// session is live only while its row is. The cookie carries a random
// token; only its hash is stored.

// SessionKind tells the kinds of session apart.
type SessionKind string

// The kinds of session.
const (
	// SessionConsole is a staff member's console session (flowd_console).
	SessionConsole SessionKind = "console"
	// SessionProvider is the built-in provider's single sign-on session of
	// a staff member (flowd_idp): while it lives, the console signs the
	// browser in again without the password.
	SessionProvider SessionKind = "provider"
	// SessionConsent is an end user's session on the consent pages
	// (flowd_consent); it belongs to no organization and is never listed.
	SessionConsent SessionKind = "consent"
)

// Session is a signed-in browser as the server remembers it.
type Session struct {
	// ID names the session on pages, in the CLI and the audit log, and is
	// the provider's sid; it admits nothing.
	ID      string
	Kind    SessionKind
	Issuer  string
	Subject string
	// StaffID is the built-in staff account signed in, or "".
	StaffID        string
	OrganizationID string
	Username       string
	// ProviderSessionID is, for a console session, the provider session it
	// was signed in through; the two end together.
	ProviderSessionID string
	// UserAgent is a summary such as "Firefox on Linux" (SummarizeUserAgent).
	UserAgent string
	Address   string
	CreatedAt time.Time
	// LastSeenAt is the last use, recorded at most once a minute.
	LastSeenAt time.Time
	// The session ends at the first of IdleUntil (moved on by use) and ExpiresAt.
	IdleUntil time.Time
	ExpiresAt time.Time
}

// LiveAt reports whether the session has not timed out at now.
func (s Session) LiveAt(now time.Time) bool {
	return now.Before(s.IdleUntil) && now.Before(s.ExpiresAt)
}

// NewSession is what starting a session takes: the session (its ID may be
// given, as the provider's sid is before its ID token is issued) and the
// cookie's token, of which only a hash is stored.
type NewSession struct {
	Session
	Token string
}

// Validate checks a new session before it is stored.
func (n NewSession) Validate() error {
	var f apperr.Fields
	if len(n.Token) < 32 {
		f.Add("token", "must be at least 32 random characters")
	}
	switch n.Kind {
	case SessionConsole, SessionProvider:
		if n.OrganizationID == "" {
			f.Add("organizationId", "is required of a staff session")
		}
		if n.Issuer == "" || n.Subject == "" {
			f.Add("subject", "the issuer and subject are required of a staff session")
		}
	case SessionConsent:
		// An end user's session names no one: their subject may be personal data.
		if n.Subject != "" || n.OrganizationID != "" || n.Username != "" || n.Address != "" || n.UserAgent != "" {
			f.Add("subject", "a consent session names no one")
		}
	default:
		f.Add("kind", "must be console, provider or consent")
	}
	if !n.CreatedAt.Before(n.IdleUntil) || !n.CreatedAt.Before(n.ExpiresAt) {
		f.Add("expiresAt", "must be after the start")
	}
	return f.Err()
}

// SessionOwner names a person whose sessions are listed or ended: the
// issuer and subject of their sign-in, within their organization.
type SessionOwner struct {
	OrganizationID string
	Issuer         string
	Subject        string
}

// ErrSessionNotFound: no live session of the organization has this id.
var ErrSessionNotFound = apperr.New(apperr.NotFound, "No such session: it has ended already, or never was.")

// Sessions keeps the sessions of staff and end users. Ending a session ends
// the sessions of the same sign-in with it: a console session and the
// provider session it was signed in through. Each method that ends
// sessions runs before in its transaction with the sessions it ended (see
// database.BeforeCommit), so that an audit entry commits with the end.
type Sessions interface {
	// StartSession stores a new session. apperr Invalid.
	StartSession(ctx context.Context, n NewSession) (Session, error)
	// SessionByToken returns the session of a cookie's token, and false when
	// it was ended or never was. Whether it timed out is the caller's to
	// judge, by its clock (LiveAt).
	SessionByToken(ctx context.Context, token string) (Session, bool, error)
	// TouchSession records a use of session id at now, and moves its idle
	// deadline to idleUntil.
	TouchSession(ctx context.Context, id string, now, idleUntil time.Time) error
	// EndSessionByToken ends the session of token (a sign-out) with those
	// of its sign-in, and returns them; none when it had ended already.
	EndSessionByToken(ctx context.Context, token string, before ...database.BeforeCommit[[]Session]) ([]Session, error)
	// EndReplacedSession ends the session of token alone, as a new sign-in
	// in its browser replaces it, and returns it; none when it had ended
	// already. The sessions of its sign-in live on.
	EndReplacedSession(ctx context.Context, token string, before ...database.BeforeCommit[[]Session]) ([]Session, error)
	// ListSessions returns the live staff sessions of an organization, of
	// one person when owner is not nil, ordered by person, newest first.
	ListSessions(ctx context.Context, organizationID string, owner *SessionOwner) ([]Session, error)
	// Session returns the organization's live staff session id. ErrSessionNotFound.
	Session(ctx context.Context, organizationID, id string) (Session, error)
	// EndSession ends the organization's staff session id with those of its
	// sign-in. ErrSessionNotFound.
	EndSession(ctx context.Context, organizationID, id string, before ...database.BeforeCommit[[]Session]) ([]Session, error)
	// EndSessionsOf ends every staff session of owner except keep (a session
	// id, or "") and those of keep's sign-in, and returns them.
	EndSessionsOf(ctx context.Context, owner SessionOwner, keep string, before ...database.BeforeCommit[[]Session]) ([]Session, error)
}

// Why sessions ended, as the audit log says it.
const (
	EndedByAdmin         = "ended by an admin"
	EndedBySelf          = "ended by its owner from another session"
	EndedByOperator      = "ended by an operator"
	EndedByPasswordReset = "the password was reset"
	EndedByRoleChange    = "the role was changed"
	EndedByDisable       = "the account was disabled"
	EndedByDelete        = "the account was deleted"
	EndedBySignIn        = "replaced by a new sign-in in the same browser"
)

// SessionAuditEntries are the audit entries of ended sessions, one for
// each session of an organization (consent sessions belong to none), by
// actor: action identity.AuditSessionSignOut when why is "", else
// identity.AuditSessionEnd with why in the detail.
func SessionAuditEntries(actor, why string, ended []Session) []identity.AuditEntry {
	var out []identity.AuditEntry
	for _, s := range ended {
		if s.OrganizationID == "" {
			continue
		}
		e := identity.AuditEntry{OrganizationID: s.OrganizationID, Actor: actor, Action: identity.AuditSessionSignOut,
			Target: truncateRunes(s.Username, 200), Detail: s.describe()}
		if why != "" {
			e.Action, e.Detail = identity.AuditSessionEnd, e.Detail+": "+why
		}
		out = append(out, e)
	}
	return out
}

// describe names a session in an audit entry: its kind, id, start, browser and address.
func (s Session) describe() string {
	d := string(s.Kind) + " session " + s.ID + " started " + s.CreatedAt.UTC().Format(time.RFC3339)
	if s.UserAgent != "" {
		d += ", " + s.UserAgent
	}
	if s.Address != "" {
		d += ", from " + s.Address
	}
	return truncateRunes(d, 400)
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// SummarizeUserAgent turns a User-Agent header into what a person
// recognizes their browser by, such as "Firefox on Linux"; never more than
// 100 characters.
func SummarizeUserAgent(ua string) string {
	browser := ""
	for _, b := range []struct{ token, name string }{
		{"Edg/", "Edge"}, {"OPR/", "Opera"}, {"Firefox/", "Firefox"}, {"HeadlessChrome/", "Headless Chrome"},
		{"Chrome/", "Chrome"}, {"CriOS/", "Chrome"}, {"Version/", "Safari"}, {"curl/", "curl"},
	} {
		if strings.Contains(ua, b.token) {
			browser = b.name
			break
		}
	}
	if browser == "" {
		// Some other program: its product token, as it names itself.
		browser, _, _ = strings.Cut(strings.TrimSpace(ua), " ")
		browser, _, _ = strings.Cut(browser, "/")
		browser = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, truncateRunes(browser, 40))
	}
	system := ""
	for _, o := range []struct{ token, name string }{
		{"Android", "Android"}, {"iPhone", "iOS"}, {"iPad", "iPadOS"}, {"Windows", "Windows"},
		{"Mac OS X", "macOS"}, {"CrOS", "ChromeOS"}, {"Linux", "Linux"},
	} {
		if strings.Contains(ua, o.token) {
			system = o.name
			break
		}
	}
	switch {
	case browser == "":
		return "unknown browser"
	case system == "":
		return browser
	default:
		return browser + " on " + system
	}
}
