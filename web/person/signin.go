package person

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/oidclogin"
)

// This file is the sign-in of the person through an eID: the relying
// party of the consent pages and the session it starts.

// HandleConsentLogin handles "GET /consent/auth/login": the end user proves
// who they are, then returns to the consent page named by return.
func (h *Handler) HandleConsentLogin(c echo.Context) error {
	return httpkit.BeginLogin(c, h.rp, httpkit.SafeReturn(c.QueryParam("return"), "/consent/", "/consent/signed-in"), h.consentAuthParams(c))
}

// consentAuthParams are the consent sign-in's own authorization request
// parameters: ui_locales names the language of the consent pages first, so
// that the eID (the built-in test eID, or an external one such as
// ID-porten, whose language cookie is not ours) speaks it too.
func (h *Handler) consentAuthParams(c echo.Context) url.Values {
	return url.Values{"ui_locales": {httpkit.PublicLang(c, h.cfg.Secure()).UILocales()}}
}

// HandleConsentLogout handles "POST /consent/auth/logout".
func (h *Handler) HandleConsentLogout(c echo.Context) error {
	return httpkit.Logout(c, h.sessions, h.rp, h.audit, "/consent/signed-out")
}

// ConsentIdentity is the end user the consent session proved, for the
// consent pages, which compare NationalID with the flow's in constant time.
type ConsentIdentity struct {
	Issuer     string
	Subject    string
	NationalID string
	ACR        string
	// TestIdentity is true for the built-in test eID.
	TestIdentity bool
	// CSRF is the token the consent decision form must carry.
	CSRF string
	// Session names the sign-in (sessionRef).
	Session string
}

// sessionRef names the session id in the audit log: a short digest in a
// domain of its own, which tells sign-ins apart and gives none away.
func sessionRef(id string) string {
	sum := sha256.Sum256([]byte("flowd person page sign-in\x00" + id))
	return hex.EncodeToString(sum[:6])
}

// consentIdentityOf returns the end user of the request's consent session;
// an error only when the session's record cannot be read.
func (h *Handler) consentIdentityOf(c echo.Context) (ConsentIdentity, bool, error) {
	sess, ok, err := h.sessions.Get(c.Response(), c.Request())
	if err != nil || !ok || sess.Attrs["nid"] == "" {
		return ConsentIdentity{}, false, err
	}
	return ConsentIdentity{Issuer: sess.Issuer, Subject: sess.Subject, NationalID: sess.Attrs["nid"], ACR: sess.Attrs["acr"],
		TestIdentity: sess.Attrs["test"] == "1", CSRF: sess.CSRF, Session: sessionRef(sess.ID)}, true, nil
}

// HandleConsentCallback handles "GET /consent/auth/callback": the national
// id comes from the configured claim (FLOWD_CONSENT_NATIONAL_ID_CLAIM).
func (h *Handler) HandleConsentCallback(c echo.Context) error {
	id, ok, err := httpkit.FinishLogin(c, h.log, h.rp, "")
	if !ok {
		return err
	}
	nid := oidclogin.NationalIDFromClaims(id, h.cfg.ConsentNationalIDClaim)
	if nid == "" {
		return httpkit.RenderNotice(c, http.StatusForbidden, "Identity not proven",
			"The identity provider did not tell us your national id, so we cannot show you this request.", "", "")
	}
	acr, _ := id.Claims["acr"].(string)
	attrs := map[string]string{"nid": nid, "acr": acr}
	if test, _ := id.Claims["flowd_test_identity"].(bool); test {
		attrs["test"] = "1"
	}
	if err := httpkit.ReplaceSession(c, h.sessions, h.audit); err != nil {
		return err
	}
	_, err = h.sessions.Start(c.Response(), c.Request(), oidclogin.Session{Issuer: id.Issuer, Subject: id.Subject,
		IDToken: id.IDToken, Attrs: attrs})
	if err != nil {
		return err
	}
	if id.ReturnTo == "/my" {
		return c.Redirect(http.StatusSeeOther, "/my")
	}
	return c.Redirect(http.StatusSeeOther, httpkit.SafeReturn(id.ReturnTo, "/consent/", "/consent/signed-in"))
}

// HandleConsentSignedIn handles "GET /consent/signed-in": where a consent
// sign-in without a page to return to ends.
func (h *Handler) HandleConsentSignedIn(c echo.Context) error {
	if _, ok, err := h.consentIdentityOf(c); err != nil {
		return err
	} else if !ok {
		return httpkit.RenderNotice(c, http.StatusUnauthorized, "Not signed in", "Open the consent link you were sent to start again.", "", "")
	}
	return httpkit.RenderNotice(c, http.StatusOK, "Identity proven", "You have proven who you are. Go back to the consent link you were sent.", "", "")
}

// HandleConsentSignedOut handles "GET /consent/signed-out".
func (h *Handler) HandleConsentSignedOut(c echo.Context) error {
	return httpkit.RenderNotice(c, http.StatusOK, "You are signed out", "You have signed out. You can close this page.", "", "")
}
