package oauth

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/oidclogin"
)

// This file is the built-in provider's interactive side: the authorization
// endpoint, the sign-in forms (staff and the test eID), code exchange,
// userinfo and end-session.

// The built-in provider's own cookie (h.sessions, flowd_idp) holds a random
// browser id that binds sign-in forms to the browser that opened them, and,
// after a staff sign-in, the staff member (single sign-on until it ends or
// is signed out; the server keeps its record).

// idpSession returns the browser's provider session, starting an anonymous one.
func (h *Handler) idpSession(c echo.Context) (oidclogin.Session, error) {
	sess, ok, err := h.sessions.Get(c.Response(), c.Request())
	if err != nil {
		return sess, err
	}
	if ok && sess.Attrs["bid"] != "" {
		return sess, nil
	}
	return h.startIdpSession(c, nil, "")
}

// startIdpSession starts a new provider session (a new browser id) for the
// staff member a, signed in as provider session sid, or for nobody (a nil).
func (h *Handler) startIdpSession(c echo.Context, a *staff.Account, sid string) (oidclogin.Session, error) {
	sess := oidclogin.Session{Attrs: map[string]string{"bid": newBrowserID()}}
	if a != nil {
		sess.Issuer, sess.Subject = h.login.Issuer(), a.ID
		sess.Record = httpkit.StaffRecord(c, sid, a.ID, a.OrganizationID, a.Username)
	}
	return h.sessions.Start(c.Response(), c.Request(), sess)
}

func newBrowserID() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// HandleAuthorize handles "GET /oauth/authorize" and "POST /oauth/authorize".
func (h *Handler) HandleAuthorize(c echo.Context) error {
	params, err := c.FormParams()
	if err != nil {
		return httpkit.RenderNotice(c, http.StatusBadRequest, "Sign-in request refused", "The request is malformed.", "", "")
	}
	req, err := h.login.ParseAuthorize(params)
	if err != nil {
		return h.authorizeError(c, err)
	}
	sess, err := h.idpSession(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	recent := req.MaxAge < 0 || time.Since(sess.CreatedAt) <= time.Duration(req.MaxAge)*time.Second
	if req.Method == login.MethodStaff && sess.Subject != "" && req.Prompt != "login" && recent {
		to, err := h.login.IssueForStaff(ctx, req, sess.Subject, sess.Record.ID, sess.CreatedAt)
		if err == nil {
			return c.Redirect(http.StatusSeeOther, to)
		}
		if !errors.Is(err, staff.ErrBadCredentials) {
			return err
		}
		// The account was disabled or removed since: forget it and ask again.
		if sess, err = h.startIdpSession(c, nil, ""); err != nil {
			return err
		}
	}
	if req.Prompt == "none" {
		return c.Redirect(http.StatusSeeOther, h.login.LoginRequired(req).RedirectURL())
	}
	p, err := h.login.BeginLogin(ctx, req, sess.Attrs["bid"])
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
func (h *Handler) authorizeError(c echo.Context, err error) error {
	var ae *login.AuthorizeError
	if !errors.As(err, &ae) {
		return err
	}
	if ae.RedirectURI != "" {
		return c.Redirect(http.StatusSeeOther, ae.RedirectURL())
	}
	return httpkit.RenderNotice(c, http.StatusBadRequest, "Sign-in request refused", ae.Description, "", "")
}

// HandleLoginForm handles "GET /idp/login": the staff form or the test eID,
// the latter in the language of ui_locales (which /oauth/authorize passes
// on) or of its own switch (lang).
func (h *Handler) HandleLoginForm(c echo.Context) error {
	sess, err := h.idpSession(c)
	if err != nil {
		return err
	}
	p, err := h.login.PendingLogin(c.Request().Context(), c.QueryParam("request"), sess.Attrs["bid"])
	if err != nil {
		return err
	}
	return h.renderLoginForm(c, http.StatusOK, p, "", "", 0)
}

// badLevel is the message of a test eID form posted with a level it does
// not offer; the form says it in its language.
const badLevel = "Pick one of the levels offered."

// renderLoginForm shows the staff form or the test eID. The test eID's
// level is the one posted, or else the one acr_values asked for.
func (h *Handler) renderLoginForm(c echo.Context, status int, p login.Pending, typed, message string, retry time.Duration) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	if retry > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(retry.Round(time.Second)/time.Second)))
	}
	if p.Method == login.MethodTestEID {
		// The test eID speaks the language of the consent pages,
		// which their sign-in names in ui_locales.
		lang := h.loginFormLang(c)
		t := i18n.TestEIDTexts(lang)
		switch {
		case message == badLevel:
			message = t.BadLevel
		case message != "":
			message = t.BadNationalID
		}
		choice := h.login.TestEIDLevelsFor(c.QueryParam("acr_values"))
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
		return httpkit.Render(c, status, pages.TestEID(page))
	}
	return httpkit.Render(c, status, pages.StaffLogin(pages.StaffLoginPage{RequestID: p.ID, CSRF: p.FormToken,
		ClientName: p.ClientName, Username: typed, Error: message}))
}

// loginFormLang picks the test eID's language: the form's own switch
// (?lang=, remembered as on the consent pages), or, when the form comes back
// by POST, the language it was shown in (its lang field), so that an error
// stays in that language; else the client's ui_locales; else the remembered
// choice, Accept-Language, English.
func (h *Handler) loginFormLang(c echo.Context) i18n.Lang {
	if c.Request().Method == http.MethodPost {
		if lang, ok := i18n.FromUILocales(c.FormValue("lang")); ok {
			return lang
		}
	} else if c.QueryParam("lang") == "" {
		if lang, ok := i18n.FromUILocales(c.QueryParam("ui_locales")); ok {
			return lang
		}
	}
	return httpkit.PublicLang(c, h.cfg.Secure())
}

// HandleLoginSubmit handles "POST /idp/login": checks the form, then sends
// the browser back to the client with a code.
func (h *Handler) HandleLoginSubmit(c echo.Context) error {
	ctx := c.Request().Context()
	sess, err := h.idpSession(c)
	if err != nil {
		return err
	}
	bid := sess.Attrs["bid"]
	id, token := c.FormValue("request"), c.FormValue("csrf")
	p, err := h.login.PendingLogin(ctx, id, bid)
	if err != nil {
		return err
	}
	if p.Method == login.MethodTestEID {
		nid := c.FormValue("national_id")
		to, err := h.login.CompleteTestEID(ctx, id, bid, token, nid, c.FormValue("level"))
		if errors.Is(err, login.ErrBadNationalID) {
			return h.renderLoginForm(c, http.StatusBadRequest, p, nid, "Type a national id of 1 to 64 letters, digits or -.", 0)
		}
		if errors.Is(err, login.ErrBadLevel) {
			return h.renderLoginForm(c, http.StatusBadRequest, p, nid, badLevel, 0)
		}
		if err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, to)
	}
	username := c.FormValue("username")
	sid := uuid.NewString() // the provider session's, promised to the ID token before it starts
	to, a, err := h.login.CompleteStaffLogin(ctx, id, bid, token, username, c.FormValue("password"), c.RealIP(), sid)
	if errors.Is(err, staff.ErrBadCredentials) {
		return h.renderLoginForm(c, http.StatusUnauthorized, p, username, staff.ErrBadCredentials.Message, 0)
	}
	if e, ok := apperr.As(err); ok && e.Code == apperr.RateLimited {
		return h.renderLoginForm(c, http.StatusTooManyRequests, p, username, e.Message, e.RetryAfter)
	}
	if err != nil {
		return err
	}
	// A new provider session, so that a browser id known before sign-in is
	// not the one signed in; one signed in before in this browser ends.
	if err := httpkit.ReplaceSession(c, h.sessions, h.audit); err != nil {
		return err
	}
	if _, err := h.startIdpSession(c, &a, sid); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// exchangeAuthorizationCode answers the token endpoint for
// grant_type=authorization_code; the token handler calls it with the form
// and the client credentials it read (body or HTTP Basic).
func (h *Handler) exchangeAuthorizationCode(c echo.Context, form url.Values, clientID, clientSecret string) error {
	resp, err := h.login.ExchangeCode(c.Request().Context(), form, clientID, clientSecret)
	var oe *login.OAuthError
	if errors.As(err, &oe) {
		return h.writeOAuthError(c, oe)
	}
	if err != nil {
		return err
	}
	noStore(c)
	return httpkit.WriteJSON(c, http.StatusOK, resp)
}

func (h *Handler) writeOAuthError(c echo.Context, e *login.OAuthError) error {
	noStore(c)
	if e.Status == http.StatusUnauthorized {
		if e.Code == "invalid_token" {
			c.Response().Header().Set("WWW-Authenticate", httpkit.BearerChallenge(c, &apperr.Error{Code: apperr.Unauthenticated}))
		} else {
			c.Response().Header().Set("WWW-Authenticate", `Basic realm="flowd"`)
		}
	}
	return httpkit.WriteJSON(c, e.Status, e)
}

func noStore(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Pragma", "no-cache")
}

// HandleUserInfo handles "GET /oauth/userinfo" and "POST /oauth/userinfo".
func (h *Handler) HandleUserInfo(c echo.Context) error {
	raw, _ := httpkit.BearerToken(c.Request().Header.Get(echo.HeaderAuthorization))
	claims, err := h.login.UserInfo(c.Request().Context(), raw)
	var oe *login.OAuthError
	if errors.As(err, &oe) {
		return h.writeOAuthError(c, oe)
	}
	if err != nil {
		return err
	}
	noStore(c)
	return httpkit.WriteJSON(c, http.StatusOK, claims)
}

// HandleEndSession handles "GET /oauth/end_session" and "POST /oauth/end_session" (RP-initiated logout):
// it ends the provider session, then returns to the client's registered
// post-logout address or shows that the person is signed out.
func (h *Handler) HandleEndSession(c echo.Context) error {
	params, err := c.FormParams()
	if err != nil {
		return httpkit.RenderNotice(c, http.StatusBadRequest, "Sign-out request refused", "The request is malformed.", "", "")
	}
	to, err := h.login.EndSession(c.Request().Context(), params)
	// The browser's provider session ends whatever the request's other
	// parameters say: the person asked to sign out.
	sess, ok, endErr := h.sessions.Get(c.Response(), c.Request())
	if ok {
		_, endErr = h.sessions.End(c.Response(), c.Request(), sess, httpkit.SignedOut(h.audit))
	}
	if endErr != nil {
		return endErr
	}
	var ae *login.AuthorizeError
	if errors.As(err, &ae) {
		return httpkit.RenderNotice(c, http.StatusBadRequest, "You are signed out", "You are signed out here, but the application's return address was refused: "+ae.Description, "", "")
	}
	if err != nil {
		return err
	}
	if to != "" {
		return c.Redirect(http.StatusSeeOther, to)
	}
	return httpkit.RenderNotice(c, http.StatusOK, "You are signed out", "You have signed out of flowd's sign-in service.", "", "")
}
