package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/oidclogin"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// handleConsoleLogin handles "GET /console/auth/login": off to the provider.
func (s *Server) handleConsoleLogin(c echo.Context) error {
	// The console has no language of its own to pass on: the provider's own
	// negotiation (Accept-Language) serves its staff.
	return httpkit.BeginLogin(c, s.consoleRP, httpkit.SafeReturn(c.QueryParam("return"), "/console", "/console"), nil)
}

// handleConsoleCallback handles "GET /console/auth/callback": the staff
// member's organization and role come from the ID token's configured claims;
// without both, the console refuses them with a page saying why.
func (s *Server) handleConsoleCallback(c echo.Context) error {
	id, ok, err := httpkit.FinishLogin(c, s.log, s.consoleRP, "/console/auth/login")
	if !ok {
		return err
	}
	m, err := oidclogin.StaffFromClaims(id, s.cfg.ConsoleOrgClaim, s.cfg.ConsoleRolesClaim)
	if err != nil {
		s.consoleSessions.Clear(c.Response(), c.Request())
		other := s.consoleRP.LogoutURL(c.Request().Context(), id.IDToken)
		return httpkit.RenderNotice(c, http.StatusForbidden, "No access to the console",
			"You signed in, but "+err.Error()+". Ask an admin of your organization for access.", other, "Sign in with another account")
	}
	if err := httpkit.ReplaceSession(c, s.consoleSessions, s.identity); err != nil {
		return err
	}
	_, err = s.consoleSessions.Start(c.Response(), c.Request(), oidclogin.Session{Issuer: id.Issuer, Subject: id.Subject, IDToken: id.IDToken,
		Attrs:  map[string]string{"org": m.OrganizationID, "username": m.Username, "name": m.Name, "role": string(m.Role)},
		Record: s.consoleRecord(c, id, m)})
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, httpkit.SafeReturn(id.ReturnTo, "/console", "/console"))
}

// handleConsoleLogout handles "POST /console/auth/logout": the session ends
// here, then at the provider (RP-initiated logout), which returns to
// /console/signed-out.
func (s *Server) handleConsoleLogout(c echo.Context) error {
	return httpkit.Logout(c, s.consoleSessions, s.consoleRP, s.identity, "/console/signed-out")
}

// handleConsoleSignedOut handles "GET /console/signed-out".
func (s *Server) handleConsoleSignedOut(c echo.Context) error {
	return httpkit.RenderNotice(c, http.StatusOK, "You are signed out", "You have signed out of the flowd console.", "/console", "Sign in again")
}
