package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/oidclogin"
)

// This file is the staff members' sign-in to the console: its relying
// party, at the built-in provider or another issuer, and the session it
// starts.

// HandleConsoleLogin handles "GET /console/auth/login": off to the provider.
func (h *Handler) HandleConsoleLogin(c echo.Context) error {
	// The console has no language of its own to pass on: the provider's own
	// negotiation (Accept-Language) serves its staff.
	return httpkit.BeginLogin(c, h.rp, httpkit.SafeReturn(c.QueryParam("return"), "/console", "/console"), nil)
}

// HandleConsoleCallback handles "GET /console/auth/callback": the staff
// member's organization and role come from the ID token's configured claims;
// without both, the console refuses them with a page saying why.
func (h *Handler) HandleConsoleCallback(c echo.Context) error {
	id, ok, err := httpkit.FinishLogin(c, h.log, h.rp, "/console/auth/login")
	if !ok {
		return err
	}
	m, err := oidclogin.StaffFromClaims(id, h.cfg.ConsoleOrgClaim, h.cfg.ConsoleRolesClaim)
	if err != nil {
		h.staffSessions.Clear(c.Response(), c.Request())
		other := h.rp.LogoutURL(c.Request().Context(), id.IDToken)
		return httpkit.RenderNotice(c, http.StatusForbidden, "No access to the console",
			"You signed in, but "+err.Error()+". Ask an admin of your organization for access.", other, "Sign in with another account")
	}
	if err := httpkit.ReplaceSession(c, h.staffSessions, h.audit); err != nil {
		return err
	}
	_, err = h.staffSessions.Start(c.Response(), c.Request(), oidclogin.Session{Issuer: id.Issuer, Subject: id.Subject, IDToken: id.IDToken,
		Attrs:  map[string]string{"org": m.OrganizationID, "username": m.Username, "name": m.Name, "role": string(m.Role)},
		Record: h.consoleRecord(c, id, m)})
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, httpkit.SafeReturn(id.ReturnTo, "/console", "/console"))
}

// HandleConsoleLogout handles "POST /console/auth/logout": the session ends
// here, then at the provider (RP-initiated logout), which returns to
// /console/signed-out.
func (h *Handler) HandleConsoleLogout(c echo.Context) error {
	return httpkit.Logout(c, h.staffSessions, h.rp, h.audit, "/console/signed-out")
}

// HandleConsoleSignedOut handles "GET /console/signed-out".
func (h *Handler) HandleConsoleSignedOut(c echo.Context) error {
	return httpkit.RenderNotice(c, http.StatusOK, "You are signed out", "You have signed out of the flowd console.", "/console", "Sign in again")
}
