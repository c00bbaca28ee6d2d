package web

import (
	"context"
	"crypto/subtle"
	"net/http"
	"net/url"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/oidclogin"
	"github.com/flowd/flowd/modules/identity/staff"
)

// This file holds the console's session middleware (requireStaff,
// requireAdmin, the CSRF check) and what the sign-ins give the server's
// records of sessions: who, from where, and an audit entry for each end.

const (
	staffKey = "staff"
	csrfKey  = "csrf"
)

// StaffMember is the signed-in staff member of a console request. The
// organization comes only from here, never from the request.
type StaffMember struct {
	Issuer         string
	Subject        string
	OrganizationID string
	Username       string
	Name           string
	Role           staff.Role
	// SessionID names the console session of the request.
	SessionID string
}

// IsAdmin reports whether the staff member may change things.
func (m StaffMember) IsAdmin() bool { return m.Role == staff.RoleAdmin }

// staffOf returns the staff member requireStaff admitted.
func staffOf(c echo.Context) StaffMember {
	m, _ := c.Get(staffKey).(StaffMember)
	return m
}

// csrfTokenOf returns the session's CSRF token, for the forms of a page.
func csrfTokenOf(c echo.Context) string {
	t, _ := c.Get(csrfKey).(string)
	return t
}

// requireStaff admits console requests with a live console session, one
// whose record the server keeps: a page visit without one goes to sign-in
// and comes back; a POST must carry the session's CSRF token (form field
// csrf or header X-CSRF-Token).
func (s *Server) requireStaff(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		sess, ok, err := s.consoleSessions.Get(c.Response(), r)
		if err != nil {
			return err
		}
		role := staff.Role(sess.Attrs["role"])
		if !ok || sess.Attrs["org"] == "" || !role.Valid() {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				return c.Redirect(http.StatusSeeOther, "/console/auth/login?return="+url.QueryEscape(r.URL.RequestURI()))
			}
			return apperr.New(apperr.Unauthenticated, "Your session has ended. Sign in again.")
		}
		if !safeMethod(r.Method) && !csrfMatches(c, sess.CSRF) {
			return apperr.New(apperr.Forbidden, "This form has expired. Reload the page and try again.")
		}
		c.Set(staffKey, StaffMember{Issuer: sess.Issuer, Subject: sess.Subject, OrganizationID: sess.Attrs["org"],
			Username: sess.Attrs["username"], Name: sess.Attrs["name"], Role: role, SessionID: sess.Record.ID})
		c.Set(csrfKey, sess.CSRF)
		return next(c)
	}
}

// requireAdmin admits only admins; use it after requireStaff.
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !staffOf(c).IsAdmin() {
			return apperr.New(apperr.Forbidden, "Only an admin of your organization may do this.")
		}
		return next(c)
	}
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func csrfMatches(c echo.Context, want string) bool {
	got := c.Request().Header.Get("X-CSRF-Token")
	if got == "" {
		got = c.FormValue("csrf")
	}
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// staffRecord is what a staff session's record holds besides its times:
// the session's id when promised before (sid), the account, and the browser
// and address it was signed in from.
// An external issuer's username, or a forwarded address, longer than the
// record holds is cut short rather than refusing the sign-in.
func (s *Server) staffRecord(c echo.Context, id, staffID, organizationID, username string) staff.Session {
	return staff.Session{ID: id, StaffID: staffID, OrganizationID: organizationID, Username: truncateRunes(username, 320),
		UserAgent: staff.SummarizeUserAgent(c.Request().UserAgent()), Address: truncateRunes(c.RealIP(), 64)}
}

// consoleRecord is the record of the console session of sign-in id, staff
// member m. Staff of the built-in provider name their account and the
// provider session they signed in through (the ID token's sid), which ends
// with this one; an external issuer's staff have neither here.
func (s *Server) consoleRecord(c echo.Context, id oidclogin.Identity, m oidclogin.Staff) staff.Session {
	rec := s.staffRecord(c, "", "", m.OrganizationID, m.Username)
	if id.Issuer == s.login.Issuer() && uuid.Validate(id.Subject) == nil {
		rec.StaffID = id.Subject
		if sid, _ := id.Claims["sid"].(string); uuid.Validate(sid) == nil {
			rec.ProviderSessionID = sid
		}
	}
	return rec
}

// replaceSession ends the session of store that the browser brings to a
// new sign-in, so that a copy of its cookie does not outlive it.
func (s *Server) replaceSession(c echo.Context, store *oidclogin.Sessions) error {
	return store.Replace(c.Response(), c.Request(), s.sessionsEnded("", staff.EndedBySignIn))
}

// signedOut records, in the transaction of a sign-out, an entry of each
// staff session it ended, by the person who signed out.
func (s *Server) signedOut() database.BeforeCommit[[]staff.Session] {
	return s.sessionsEnded("", "")
}

// sessionsEnded records, in the transaction that ended them, an entry of
// each staff session ended (identity.SessionAuditEntries), by actor, or by
// each session's own person when actor is "".
func (s *Server) sessionsEnded(actor, why string) database.BeforeCommit[[]staff.Session] {
	return func(ctx context.Context, tx database.Tx, ended []staff.Session) error {
		for _, one := range ended {
			by := actor
			if by == "" {
				by = "staff:" + one.Username
			}
			for _, e := range staff.SessionAuditEntries(by, why, []staff.Session{one}) {
				if err := s.audit.RecordAuditTx(ctx, tx, e); err != nil {
					return auditFailed(err)
				}
			}
		}
		return nil
	}
}
