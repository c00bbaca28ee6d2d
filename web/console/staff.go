package console

import (
	"net/http"
	"net/url"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/oidclogin"
)

// This file holds the console's session middleware (RequireStaff,
// RequireAdmin, the CSRF check) and the record of a console sign-in.

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

// StaffOf returns the staff member RequireStaff admitted.
func StaffOf(c echo.Context) StaffMember {
	m, _ := c.Get(staffKey).(StaffMember)
	return m
}

// csrfTokenOf returns the session's CSRF token, for the forms of a page.
func csrfTokenOf(c echo.Context) string {
	t, _ := c.Get(csrfKey).(string)
	return t
}

// RequireStaff admits console requests with a live console session, one
// whose record the server keeps: a page visit without one goes to sign-in
// and comes back; a POST must carry the session's CSRF token (form field
// csrf or header X-CSRF-Token).
func (h *Handler) RequireStaff(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		sess, ok, err := h.staffSessions.Get(c.Response(), r)
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
		if !safeMethod(r.Method) && !httpkit.CSRFMatches(c, sess.CSRF) {
			return apperr.New(apperr.Forbidden, "This form has expired. Reload the page and try again.")
		}
		c.Set(staffKey, StaffMember{Issuer: sess.Issuer, Subject: sess.Subject, OrganizationID: sess.Attrs["org"],
			Username: sess.Attrs["username"], Name: sess.Attrs["name"], Role: role, SessionID: sess.Record.ID})
		c.Set(csrfKey, sess.CSRF)
		return next(c)
	}
}

// RequireAdmin admits only admins; use it after RequireStaff.
func RequireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !StaffOf(c).IsAdmin() {
			return apperr.New(apperr.Forbidden, "Only an admin of your organization may do this.")
		}
		return next(c)
	}
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// consoleRecord is the record of the console session of sign-in id, staff
// member m. Staff of the built-in provider name their account and the
// provider session they signed in through (the ID token's sid), which ends
// with this one; an external issuer's staff have neither here.
func (h *Handler) consoleRecord(c echo.Context, id oidclogin.Identity, m oidclogin.Staff) staff.Session {
	rec := httpkit.StaffRecord(c, "", "", m.OrganizationID, m.Username)
	if id.Issuer == h.builtInIssuer && uuid.Validate(id.Subject) == nil {
		rec.StaffID = id.Subject
		if sid, _ := id.Claims["sid"].(string); uuid.Validate(sid) == nil {
			rec.ProviderSessionID = sid
		}
	}
	return rec
}
