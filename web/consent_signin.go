package web

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/oidclogin"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// handleConsentLogin handles "GET /consent/auth/login": the end user proves
// who they are, then returns to the consent page named by return.
func (s *Server) handleConsentLogin(c echo.Context) error {
	return httpkit.BeginLogin(c, s.consentRP, httpkit.SafeReturn(c.QueryParam("return"), "/consent/", "/consent/signed-in"), s.consentAuthParams(c))
}

// consentAuthParams are the consent sign-in's own authorization request
// parameters: ui_locales names the language of the consent pages first, so
// that the eID (the built-in test eID, or an external one such as
// ID-porten, whose language cookie is not ours) speaks it too.
func (s *Server) consentAuthParams(c echo.Context) url.Values {
	return url.Values{"ui_locales": {httpkit.PublicLang(c, s.cfg.Secure()).UILocales()}}
}

// handleConsentLogout handles "POST /consent/auth/logout".
func (s *Server) handleConsentLogout(c echo.Context) error {
	return httpkit.Logout(c, s.consentSessions, s.consentRP, s.identity, "/consent/signed-out")
}

// ConsentIdentity is the end user the consent session proved, for issue 7's
// pages, which compare NationalID with the flow's in constant time.
type ConsentIdentity struct {
	Issuer     string
	Subject    string
	NationalID string
	ACR        string
	// TestIdentity is true for the built-in test eID.
	TestIdentity bool
	// CSRF is the token the consent decision form must carry.
	CSRF string
}

// consentIdentityOf returns the end user of the request's consent session;
// an error only when the session's record cannot be read.
func (s *Server) consentIdentityOf(c echo.Context) (ConsentIdentity, bool, error) {
	sess, ok, err := s.consentSessions.Get(c.Response(), c.Request())
	if err != nil || !ok || sess.Attrs["nid"] == "" {
		return ConsentIdentity{}, false, err
	}
	return ConsentIdentity{Issuer: sess.Issuer, Subject: sess.Subject, NationalID: sess.Attrs["nid"], ACR: sess.Attrs["acr"],
		TestIdentity: sess.Attrs["test"] == "1", CSRF: sess.CSRF}, true, nil
}

// handleConsentCallback handles "GET /consent/auth/callback": the national
// id comes from the configured claim (FLOWD_CONSENT_NATIONAL_ID_CLAIM).
func (s *Server) handleConsentCallback(c echo.Context) error {
	id, ok, err := httpkit.FinishLogin(c, s.log, s.consentRP, "")
	if !ok {
		return err
	}
	nid := oidclogin.NationalIDFromClaims(id, s.cfg.ConsentNationalIDClaim)
	if nid == "" {
		return httpkit.RenderNotice(c, http.StatusForbidden, "Identity not proven",
			"The identity provider did not tell us your national id, so we cannot show you this request.", "", "")
	}
	acr, _ := id.Claims["acr"].(string)
	attrs := map[string]string{"nid": nid, "acr": acr}
	if test, _ := id.Claims["flowd_test_identity"].(bool); test {
		attrs["test"] = "1"
	}
	if err := httpkit.ReplaceSession(c, s.consentSessions, s.identity); err != nil {
		return err
	}
	_, err = s.consentSessions.Start(c.Response(), c.Request(), oidclogin.Session{Issuer: id.Issuer, Subject: id.Subject,
		IDToken: id.IDToken, Attrs: attrs})
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, httpkit.SafeReturn(id.ReturnTo, "/consent/", "/consent/signed-in"))
}

// handleConsentSignedIn handles "GET /consent/signed-in": where a consent
// sign-in without a page to return to ends.
func (s *Server) handleConsentSignedIn(c echo.Context) error {
	if _, ok, err := s.consentIdentityOf(c); err != nil {
		return err
	} else if !ok {
		return httpkit.RenderNotice(c, http.StatusUnauthorized, "Not signed in", "Open the consent link you were sent to start again.", "", "")
	}
	return httpkit.RenderNotice(c, http.StatusOK, "Identity proven", "You have proven who you are. Go back to the consent link you were sent.", "", "")
}

// handleConsentSignedOut handles "GET /consent/signed-out".
func (s *Server) handleConsentSignedOut(c echo.Context) error {
	return httpkit.RenderNotice(c, http.StatusOK, "You are signed out", "You have signed out. You can close this page.", "", "")
}
