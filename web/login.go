package web

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/oidclogin"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/pages"
)

// This file is interactive login (issue 6): the built-in provider's
// authorization endpoint, sign-in forms, code exchange, userinfo and
// end-session; and the console's and consent pages' relying-party side:
// sign-in, callback, sessions, sign-out.

// The built-in provider's own cookie (s.idp, flowd_idp) holds a random
// browser id that binds sign-in forms to the browser that opened them, and,
// after a staff sign-in, the staff member (single sign-on until it ends or
// is signed out; the server keeps its record).

// idpSession returns the browser's provider session, starting an anonymous one.
func (s *Server) idpSession(c echo.Context) (oidclogin.Session, error) {
	sess, ok, err := s.idp.Get(c.Response(), c.Request())
	if err != nil {
		return sess, err
	}
	if ok && sess.Attrs["bid"] != "" {
		return sess, nil
	}
	return s.startIdpSession(c, nil, "")
}

// startIdpSession starts a new provider session (a new browser id) for the
// staff member a, signed in as provider session sid, or for nobody (a nil).
func (s *Server) startIdpSession(c echo.Context, a *staff.Account, sid string) (oidclogin.Session, error) {
	sess := oidclogin.Session{Attrs: map[string]string{"bid": newBrowserID()}}
	if a != nil {
		sess.Issuer, sess.Subject = s.login.Issuer(), a.ID
		sess.Record = s.staffRecord(c, sid, a.ID, a.OrganizationID, a.Username)
	}
	return s.idp.Start(c.Response(), c.Request(), sess)
}

func newBrowserID() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// handleAuthorize handles "GET /oauth/authorize" and "POST /oauth/authorize".
func (s *Server) handleAuthorize(c echo.Context) error {
	params, err := c.FormParams()
	if err != nil {
		return s.renderNotice(c, http.StatusBadRequest, "Sign-in request refused", "The request is malformed.", "", "")
	}
	req, err := s.login.ParseAuthorize(params)
	if err != nil {
		return s.authorizeError(c, err)
	}
	sess, err := s.idpSession(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	recent := req.MaxAge < 0 || time.Since(sess.CreatedAt) <= time.Duration(req.MaxAge)*time.Second
	if req.Method == login.MethodStaff && sess.Subject != "" && req.Prompt != "login" && recent {
		to, err := s.login.IssueForStaff(ctx, req, sess.Subject, sess.Record.ID, sess.CreatedAt)
		if err == nil {
			return c.Redirect(http.StatusSeeOther, to)
		}
		if !errors.Is(err, staff.ErrBadCredentials) {
			return err
		}
		// The account was disabled or removed since: forget it and ask again.
		if sess, err = s.startIdpSession(c, nil, ""); err != nil {
			return err
		}
	}
	if req.Prompt == "none" {
		return c.Redirect(http.StatusSeeOther, s.login.LoginRequired(req).RedirectURL())
	}
	p, err := s.login.BeginLogin(ctx, req, sess.Attrs["bid"])
	if err != nil {
		return err
	}
	to := "/idp/login?request=" + url.QueryEscape(p.ID)
	// The form speaks the first of the client's ui_locales that we have.
	if lang, ok := i18n.FromUILocales(req.UILocales); ok {
		to += "&ui_locales=" + string(lang)
	}
	// The test eID preselects the assurance level asked for.
	if req.ACRValues != "" {
		to += "&acr_values=" + url.QueryEscape(req.ACRValues)
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// authorizeError sends a refused authorization request back to the client,
// or shows it when the client cannot be trusted with it.
func (s *Server) authorizeError(c echo.Context, err error) error {
	var ae *login.AuthorizeError
	if !errors.As(err, &ae) {
		return err
	}
	if ae.RedirectURI != "" {
		return c.Redirect(http.StatusSeeOther, ae.RedirectURL())
	}
	return s.renderNotice(c, http.StatusBadRequest, "Sign-in request refused", ae.Description, "", "")
}

// handleLoginForm handles "GET /idp/login": the staff form or the test eID,
// the latter in the language of ui_locales (which /oauth/authorize passes
// on) or of its own switch (lang).
func (s *Server) handleLoginForm(c echo.Context) error {
	sess, err := s.idpSession(c)
	if err != nil {
		return err
	}
	p, err := s.login.PendingLogin(c.Request().Context(), c.QueryParam("request"), sess.Attrs["bid"])
	if err != nil {
		return err
	}
	return s.renderLoginForm(c, http.StatusOK, p, "", "", 0)
}

// badLevel is the message of a test eID form posted with a level it does
// not offer; the form says it in its language.
const badLevel = "Pick one of the levels offered."

// renderLoginForm shows the staff form or the test eID. The test eID's
// level is the one posted, or else the one acr_values asked for.
func (s *Server) renderLoginForm(c echo.Context, status int, p login.Pending, typed, message string, retry time.Duration) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	if retry > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(retry.Round(time.Second)/time.Second)))
	}
	if p.Method == login.MethodTestEID {
		// The test eID speaks the language of the consent pages (issue 7),
		// which their sign-in names in ui_locales.
		lang := s.loginFormLang(c)
		t := i18n.TestEIDTexts(lang)
		switch {
		case message == badLevel:
			message = t.BadLevel
		case message != "":
			message = t.BadNationalID
		}
		choice := s.login.TestEIDLevelsFor(c.QueryParam("acr_values"))
		if posted := c.FormValue("level"); posted != "" {
			choice.Selected = posted
		}
		page := pages.TestEIDPage{RequestID: p.ID, CSRF: p.FormToken,
			ClientName: p.ClientName, NationalID: typed, Error: message, Lang: string(lang), T: t,
			SwitchURL: "/idp/login?request=" + url.QueryEscape(p.ID) + "&lang=" + string(lang.Other())}
		if av := c.QueryParam("acr_values"); av != "" {
			page.SwitchURL += "&acr_values=" + url.QueryEscape(av) // the switch keeps the level asked for
		}
		for _, l := range choice.Levels {
			page.Levels = append(page.Levels, pages.TestEIDLevel{Value: l.Level, Label: t.Level(l.Level), ACR: l.ACR,
				Checked: l.Level == choice.Selected})
		}
		return s.render(c, status, pages.TestEID(page))
	}
	return s.render(c, status, pages.StaffLogin(pages.StaffLoginPage{RequestID: p.ID, CSRF: p.FormToken,
		ClientName: p.ClientName, Username: typed, Error: message}))
}

// loginFormLang picks the test eID's language: the form's own switch
// (?lang=, remembered as on the consent pages), or, when the form comes back
// by POST, the language it was shown in (its lang field), so that an error
// stays in that language; else the client's ui_locales; else the remembered
// choice, Accept-Language, English.
func (s *Server) loginFormLang(c echo.Context) i18n.Lang {
	if c.Request().Method == http.MethodPost {
		if lang, ok := i18n.FromUILocales(c.FormValue("lang")); ok {
			return lang
		}
	} else if c.QueryParam("lang") == "" {
		if lang, ok := i18n.FromUILocales(c.QueryParam("ui_locales")); ok {
			return lang
		}
	}
	return s.publicLang(c)
}

// handleLoginSubmit handles "POST /idp/login": checks the form, then sends
// the browser back to the client with a code.
func (s *Server) handleLoginSubmit(c echo.Context) error {
	ctx := c.Request().Context()
	sess, err := s.idpSession(c)
	if err != nil {
		return err
	}
	bid := sess.Attrs["bid"]
	id, token := c.FormValue("request"), c.FormValue("csrf")
	p, err := s.login.PendingLogin(ctx, id, bid)
	if err != nil {
		return err
	}
	if p.Method == login.MethodTestEID {
		nid := c.FormValue("national_id")
		to, err := s.login.CompleteTestEID(ctx, id, bid, token, nid, c.FormValue("level"))
		if errors.Is(err, login.ErrBadNationalID) {
			return s.renderLoginForm(c, http.StatusBadRequest, p, nid, "Type a national id of 1 to 64 letters, digits or -.", 0)
		}
		if errors.Is(err, login.ErrBadLevel) {
			return s.renderLoginForm(c, http.StatusBadRequest, p, nid, badLevel, 0)
		}
		if err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, to)
	}
	username := c.FormValue("username")
	sid := uuid.NewString() // the provider session's, promised to the ID token before it starts
	to, a, err := s.login.CompleteStaffLogin(ctx, id, bid, token, username, c.FormValue("password"), c.RealIP(), sid)
	if errors.Is(err, staff.ErrBadCredentials) {
		return s.renderLoginForm(c, http.StatusUnauthorized, p, username, staff.ErrBadCredentials.Message, 0)
	}
	if e, ok := apperr.As(err); ok && e.Code == apperr.RateLimited {
		return s.renderLoginForm(c, http.StatusTooManyRequests, p, username, e.Message, e.RetryAfter)
	}
	if err != nil {
		return err
	}
	// A new provider session, so that a browser id known before sign-in is
	// not the one signed in; one signed in before in this browser ends.
	if err := s.replaceSession(c, s.idp); err != nil {
		return err
	}
	if _, err := s.startIdpSession(c, &a, sid); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// exchangeAuthorizationCode answers the token endpoint for
// grant_type=authorization_code; the token handler calls it with the form
// and the client credentials it read (body or HTTP Basic).
func (s *Server) exchangeAuthorizationCode(c echo.Context, form url.Values, clientID, clientSecret string) error {
	resp, err := s.login.ExchangeCode(c.Request().Context(), form, clientID, clientSecret)
	var oe *login.OAuthError
	if errors.As(err, &oe) {
		return s.writeOAuthError(c, oe)
	}
	if err != nil {
		return err
	}
	noStore(c)
	return s.writeJSON(c, http.StatusOK, resp)
}

func (s *Server) writeOAuthError(c echo.Context, e *login.OAuthError) error {
	noStore(c)
	if e.Status == http.StatusUnauthorized {
		if e.Code == "invalid_token" {
			c.Response().Header().Set("WWW-Authenticate", bearerChallenge(c, &apperr.Error{Code: apperr.Unauthenticated}))
		} else {
			c.Response().Header().Set("WWW-Authenticate", `Basic realm="flowd"`)
		}
	}
	return s.writeJSON(c, e.Status, e)
}

func noStore(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Pragma", "no-cache")
}

// handleUserInfo handles "GET /oauth/userinfo" and "POST /oauth/userinfo".
func (s *Server) handleUserInfo(c echo.Context) error {
	raw, _ := bearerToken(c.Request().Header.Get(echo.HeaderAuthorization))
	claims, err := s.login.UserInfo(c.Request().Context(), raw)
	var oe *login.OAuthError
	if errors.As(err, &oe) {
		return s.writeOAuthError(c, oe)
	}
	if err != nil {
		return err
	}
	noStore(c)
	return s.writeJSON(c, http.StatusOK, claims)
}

// handleEndSession handles "GET /oauth/end_session" and "POST /oauth/end_session" (RP-initiated logout):
// it ends the provider session, then returns to the client's registered
// post-logout address or shows that the person is signed out.
func (s *Server) handleEndSession(c echo.Context) error {
	params, err := c.FormParams()
	if err != nil {
		return s.renderNotice(c, http.StatusBadRequest, "Sign-out request refused", "The request is malformed.", "", "")
	}
	to, err := s.login.EndSession(c.Request().Context(), params)
	// The browser's provider session ends whatever the request's other
	// parameters say: the person asked to sign out.
	sess, ok, endErr := s.idp.Get(c.Response(), c.Request())
	if ok {
		_, endErr = s.idp.End(c.Response(), c.Request(), sess, s.signedOut())
	}
	if endErr != nil {
		return endErr
	}
	var ae *login.AuthorizeError
	if errors.As(err, &ae) {
		return s.renderNotice(c, http.StatusBadRequest, "You are signed out", "You are signed out here, but the application's return address was refused: "+ae.Description, "", "")
	}
	if err != nil {
		return err
	}
	if to != "" {
		return c.Redirect(http.StatusSeeOther, to)
	}
	return s.renderNotice(c, http.StatusOK, "You are signed out", "You have signed out of flowd's sign-in service.", "", "")
}

// renderNotice renders a short page with a message and an optional link.
func (s *Server) renderNotice(c echo.Context, status int, title, message, linkURL, linkText string) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return s.render(c, status, pages.Notice(pages.NoticePage{Status: status, Title: title, Message: message, LinkURL: linkURL, LinkText: linkText}))
}

// --- The relying parties: console (staff) and consent (end users). ---

// safeReturn accepts only a local path under prefix as where to go after
// sign-in, so that the sign-in cannot be turned into an open redirect.
func safeReturn(raw, prefix, fallback string) string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(raw, prefix) || strings.HasPrefix(raw, "//") || strings.ContainsAny(raw, "\\\r\n") {
		return fallback
	}
	return raw
}

// handleConsoleLogin handles "GET /console/auth/login": off to the provider.
func (s *Server) handleConsoleLogin(c echo.Context) error {
	// The console has no language of its own to pass on: the provider's own
	// negotiation (Accept-Language) serves its staff.
	return s.beginLogin(c, s.consoleRP, safeReturn(c.QueryParam("return"), "/console", "/console"), nil)
}

// handleConsentLogin handles "GET /consent/auth/login": the end user proves
// who they are, then returns to the consent page named by return.
func (s *Server) handleConsentLogin(c echo.Context) error {
	return s.beginLogin(c, s.consentRP, safeReturn(c.QueryParam("return"), "/consent/", "/consent/signed-in"), s.consentAuthParams(c))
}

// consentAuthParams are the consent sign-in's own authorization request
// parameters: ui_locales names the language of the consent pages first, so
// that the eID (the built-in test eID, or an external one such as
// ID-porten, whose language cookie is not ours) speaks it too.
func (s *Server) consentAuthParams(c echo.Context) url.Values {
	return url.Values{"ui_locales": {s.publicLang(c).UILocales()}}
}

func (s *Server) beginLogin(c echo.Context, rp *oidclogin.RelyingParty, returnTo string, params url.Values) error {
	to, err := rp.Begin(c.Response(), c.Request(), returnTo, params)
	if errors.Is(err, oidclogin.ErrUnavailable) {
		return apperr.Wrap(err, apperr.Unavailable, "The sign-in service cannot be reached. Try again shortly.")
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// finishLogin runs the callback checks and turns their failures into pages.
func (s *Server) finishLogin(c echo.Context, rp *oidclogin.RelyingParty, retry string) (oidclogin.Identity, bool, error) {
	id, err := rp.Finish(c.Response(), c.Request())
	var pe *oidclogin.ProviderError
	switch {
	case err == nil:
		return id, true, nil
	case errors.Is(err, oidclogin.ErrState):
		return id, false, s.renderNotice(c, http.StatusBadRequest, "Sign-in expired",
			"This sign-in was not started in this browser, was used already, or took too long.", retry, "Sign in again")
	case errors.As(err, &pe):
		return id, false, s.renderNotice(c, http.StatusUnauthorized, "Sign-in not completed",
			"The sign-in service answered: "+pe.Code+".", retry, "Try again")
	case errors.Is(err, oidclogin.ErrRejected):
		s.log.Warn("sign-in rejected", "request_id", requestIDOf(c), "error", err.Error())
		return id, false, s.renderNotice(c, http.StatusUnauthorized, "Sign-in failed",
			"The answer of the sign-in service did not pass our checks.", retry, "Try again")
	case errors.Is(err, oidclogin.ErrUnavailable):
		return id, false, apperr.Wrap(err, apperr.Unavailable, "The sign-in service cannot be reached. Try again shortly.")
	default:
		return id, false, err
	}
}

// handleConsoleCallback handles "GET /console/auth/callback": the staff
// member's organization and role come from the ID token's configured claims;
// without both, the console refuses them with a page saying why.
func (s *Server) handleConsoleCallback(c echo.Context) error {
	id, ok, err := s.finishLogin(c, s.consoleRP, "/console/auth/login")
	if !ok {
		return err
	}
	m, err := oidclogin.StaffFromClaims(id, s.cfg.ConsoleOrgClaim, s.cfg.ConsoleRolesClaim)
	if err != nil {
		s.consoleSessions.Clear(c.Response(), c.Request())
		other := s.consoleRP.LogoutURL(c.Request().Context(), id.IDToken)
		return s.renderNotice(c, http.StatusForbidden, "No access to the console",
			"You signed in, but "+err.Error()+". Ask an admin of your organization for access.", other, "Sign in with another account")
	}
	if err := s.replaceSession(c, s.consoleSessions); err != nil {
		return err
	}
	_, err = s.consoleSessions.Start(c.Response(), c.Request(), oidclogin.Session{Issuer: id.Issuer, Subject: id.Subject, IDToken: id.IDToken,
		Attrs:  map[string]string{"org": m.OrganizationID, "username": m.Username, "name": m.Name, "role": string(m.Role)},
		Record: s.consoleRecord(c, id, m)})
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeReturn(id.ReturnTo, "/console", "/console"))
}

// handleConsoleLogout handles "POST /console/auth/logout": the session ends
// here, then at the provider (RP-initiated logout), which returns to
// /console/signed-out.
func (s *Server) handleConsoleLogout(c echo.Context) error {
	return s.logout(c, s.consoleSessions, s.consoleRP, "/console/signed-out")
}

// handleConsentLogout handles "POST /consent/auth/logout".
func (s *Server) handleConsentLogout(c echo.Context) error {
	return s.logout(c, s.consentSessions, s.consentRP, "/consent/signed-out")
}

// logout ends the session of store here, with its record and those of its
// sign-in (a console session's provider session), each in the audit log,
// then at the provider.
func (s *Server) logout(c echo.Context, store *oidclogin.Sessions, rp *oidclogin.RelyingParty, signedOut string) error {
	sess, ok, err := store.Get(c.Response(), c.Request())
	if err != nil {
		return err
	}
	if !ok {
		return c.Redirect(http.StatusSeeOther, signedOut)
	}
	if !csrfMatches(c, sess.CSRF) {
		return apperr.New(apperr.Forbidden, "This form has expired. Reload the page and try again.")
	}
	if _, err := store.End(c.Response(), c.Request(), sess, s.signedOut()); err != nil {
		return err
	}
	if rp != nil {
		if to := rp.LogoutURL(c.Request().Context(), sess.IDToken); to != "" {
			return c.Redirect(http.StatusSeeOther, to)
		}
	}
	return c.Redirect(http.StatusSeeOther, signedOut)
}

// handleConsoleSignedOut handles "GET /console/signed-out".
func (s *Server) handleConsoleSignedOut(c echo.Context) error {
	return s.renderNotice(c, http.StatusOK, "You are signed out", "You have signed out of the flowd console.", "/console", "Sign in again")
}

// TestEIDLevels are the levels the test eID offers under m, weakest first:
// those m maps, each with its acr.
func TestEIDLevels(m consent.ACRMap) []login.TestEIDLevel {
	var out []login.TestEIDLevel
	for _, l := range consent.AssuranceLevels {
		if acr := m[l]; acr != "" {
			out = append(out, login.TestEIDLevel{Level: string(l), ACR: acr})
		}
	}
	return out
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
	id, ok, err := s.finishLogin(c, s.consentRP, "")
	if !ok {
		return err
	}
	nid := oidclogin.NationalIDFromClaims(id, s.cfg.ConsentNationalIDClaim)
	if nid == "" {
		return s.renderNotice(c, http.StatusForbidden, "Identity not proven",
			"The identity provider did not tell us your national id, so we cannot show you this request.", "", "")
	}
	acr, _ := id.Claims["acr"].(string)
	attrs := map[string]string{"nid": nid, "acr": acr}
	if test, _ := id.Claims["flowd_test_identity"].(bool); test {
		attrs["test"] = "1"
	}
	if err := s.replaceSession(c, s.consentSessions); err != nil {
		return err
	}
	_, err = s.consentSessions.Start(c.Response(), c.Request(), oidclogin.Session{Issuer: id.Issuer, Subject: id.Subject,
		IDToken: id.IDToken, Attrs: attrs})
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeReturn(id.ReturnTo, "/consent/", "/consent/signed-in"))
}

// handleConsentSignedIn handles "GET /consent/signed-in": where a consent
// sign-in without a page to return to ends.
func (s *Server) handleConsentSignedIn(c echo.Context) error {
	if _, ok, err := s.consentIdentityOf(c); err != nil {
		return err
	} else if !ok {
		return s.renderNotice(c, http.StatusUnauthorized, "Not signed in", "Open the consent link you were sent to start again.", "", "")
	}
	return s.renderNotice(c, http.StatusOK, "Identity proven", "You have proven who you are. Go back to the consent link you were sent.", "", "")
}

// handleConsentSignedOut handles "GET /consent/signed-out".
func (s *Server) handleConsentSignedOut(c echo.Context) error {
	return s.renderNotice(c, http.StatusOK, "You are signed out", "You have signed out. You can close this page.", "", "")
}
