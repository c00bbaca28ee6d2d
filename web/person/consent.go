package person

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

const (
	csrfField      = "_csrf"
	langCookie     = "flowd_lang"
	consentCSRFKey = "consent_csrf"
)

// ConsentCSRF protects the decision form: a token in a cookie scoped to
// /consent that the form must echo, unless the browser's fetch metadata
// already proves the POST same-origin.
func (h *Handler) ConsentCSRF() echo.MiddlewareFunc {
	return middleware.CSRFWithConfig(middleware.CSRFConfig{
		TokenLookup:    "form:" + csrfField,
		ContextKey:     consentCSRFKey,
		CookieName:     "flowd_consent_csrf",
		CookiePath:     "/consent",
		CookieHTTPOnly: true,
		CookieSecure:   h.cfg.Secure(),
		CookieSameSite: http.SameSiteLaxMode,
		// Another site's POST gets the same refusal page as a missing token
		// (it cannot have the token: its cookie is SameSite=Lax).
		AllowSecFetchSiteFunc: func(echo.Context) (bool, error) { return false, nil },
		// A refused form says so in the individual's language and offers the
		// page again, where a fresh form awaits; nothing was recorded.
		ErrorHandler: func(err error, c echo.Context) error {
			frame := h.consentFrame(c)
			return httpkit.Render(c, http.StatusForbidden, pages.ConsentMessagePage(pages.ConsentMessage{
				ConsentFrame: frame, Title: frame.T.FormExpiredTitle, Message: frame.T.FormExpired,
				ActionURL: "/consent/" + c.Param("token"), ActionLabel: frame.T.BackToRequest,
			}))
		},
	})
}

// HandleConsentPage handles "GET /consent/:token": the first visit opens the
// request; then the individual proves who they are and sees the decision form.
func (h *Handler) HandleConsentPage(c echo.Context) error {
	frame := h.consentFrame(c)
	req, err := h.consent.Visit(c.Request().Context(), c.Param("token"))
	if err != nil {
		return h.consentError(c, frame, err)
	}
	if req.Closure != consent.Open && req.Closure != consent.Decided {
		return h.consentClosed(c, frame, req.Closure)
	}
	summary := pages.ConsentRequest{Text: httpkit.ConsentTextOf(req.Text, req.Parameters, req.OrganizationName, frame), ReferenceName: req.ReferenceName,
		ReferenceID: req.ReferenceID, MaskedNationalID: req.MaskedNationalID, NationalIDEnd: req.NationalIDEnd}
	if !req.ExpiresAt.IsZero() && req.Closure == consent.Open {
		summary.AnswerBy = frame.Date(req.ExpiresAt)
	}
	self := "/consent/" + c.Param("token")
	if proven, err := h.consentProven(c, frame, req, summary); !proven {
		return err
	}
	token, _ := c.Get(consentCSRFKey).(string)
	if req.Closure == consent.Decided {
		return h.consentAnswered(c, frame, req, summary, token)
	}
	page := pages.ConsentDecide{ConsentFrame: frame, Request: summary, DecisionURL: self, CSRFField: csrfField,
		CSRFToken: token, ReturnHost: hostOf(req.RedirectURL)}
	if h.cfg.ConsentAuth == "oidc" {
		page.SwitchPersonURL = self + "/login?again=1"
	}
	return httpkit.Render(c, http.StatusOK, pages.ConsentDecidePage(page))
}

// consentProven checks, when proof is on, that the person signed in is the
// one req is for, at its assurance level; when not, it renders the page that
// says what to do (sign in, someone else's request, a stronger eID) and
// returns false with the render's error.
func (h *Handler) consentProven(c echo.Context, frame pages.ConsentFrame, req consent.Request, summary pages.ConsentRequest) (bool, error) {
	if h.cfg.ConsentAuth != "oidc" {
		return true, nil
	}
	proven, ok, err := h.consentIdentityOf(c)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, httpkit.Render(c, http.StatusOK, pages.ConsentStartPage(pages.ConsentStart{
			ConsentFrame: frame, Request: summary, LoginURL: "/consent/" + c.Param("token") + "/login", TestEID: h.cfg.TestEID,
		}))
	}
	if err := h.consent.CheckPerson(c.Request().Context(), req, proven.NationalID); err != nil {
		return false, h.consentWrongPerson(c, frame)
	}
	var weak *consent.AssuranceError
	if errors.As(h.consent.CheckAssurance(req, proven.ACR), &weak) {
		return false, h.consentNeedsStrongerEID(c, frame, weak)
	}
	return true, nil
}

// consentAnswered is the page of an answered request: the answer, its
// receipts and, for an acceptance, the form that withdraws it.
func (h *Handler) consentAnswered(c echo.Context, frame pages.ConsentFrame, req consent.Request, summary pages.ConsentRequest, csrfToken string) error {
	receipts, err := h.consent.Receipts(c.Request().Context(), req)
	if err != nil {
		return err
	}
	page := pages.ConsentAnswered{ConsentFrame: frame, Request: summary, CSRFField: csrfField, CSRFToken: csrfToken,
		VerifyURL: "/receipts/verify"}
	var when string
	if req.DecidedAt != nil {
		when = frame.Date(*req.DecidedAt)
	}
	page.Answer = fmt.Sprintf(frame.T.AnsweredRejected, when)
	if req.Status == flows.Accepted {
		page.Answer = fmt.Sprintf(frame.T.AnsweredAccepted, when)
		page.WithdrawURL = "/consent/" + c.Param("token") + "/withdraw"
		page.WithdrawFor = req.OrganizationName
		if req.ValidUntil != nil {
			page.ValidUntil = frame.Date(*req.ValidUntil)
		}
	}
	for _, r := range receipts {
		page.Receipts = append(page.Receipts, receiptCard(frame, r.Receipt, r.JWS))
	}
	return httpkit.Render(c, http.StatusOK, pages.ConsentAnsweredPage(page))
}

// HandleConsentWithdraw handles "POST /consent/:token/withdraw": the person
// withdraws their acceptance, after the same proof as the decision, and gets
// the withdrawal's receipt on the page that confirms it.
func (h *Handler) HandleConsentWithdraw(c echo.Context) error {
	frame := h.consentFrame(c)
	proof, err := h.consentProof(c)
	if err != nil {
		return err
	}
	r, err := h.consent.Withdraw(c.Request().Context(), c.Param("token"), proof)
	if err != nil {
		return h.consentRefused(c, frame, err)
	}
	return httpkit.Render(c, http.StatusOK, pages.ConsentWithdrawnPage(pages.ConsentWithdrawn{ConsentFrame: frame,
		Message:  withdrawnMessage(frame.T, r.Receipt),
		Receipts: []pages.ReceiptCard{receiptCard(frame, r.Receipt, r.JWS)}, VerifyURL: "/receipts/verify"}))
}

// withdrawnMessage says who has been told of a withdrawal: the organization
// that asked, and who may no longer receive the data when that is another.
func withdrawnMessage(t i18n.Consent, r receipts.Receipt) string {
	organization, recipient := r.Parties()
	if organization == "" || organization == recipient {
		return fmt.Sprintf(t.WithdrawnDone, cmp.Or(organization, recipient))
	}
	return fmt.Sprintf(t.WithdrawnDoneFor, organization, recipient)
}

// consentProof is the proof a decision or withdrawal comes with: the
// identity signed in, or none needed when proof is off.
func (h *Handler) consentProof(c echo.Context) (consent.Proof, error) {
	proof := consent.Proof{Skip: h.cfg.ConsentAuth != "oidc"}
	if proof.Skip {
		return proof, nil
	}
	id, ok, err := h.consentIdentityOf(c)
	if ok {
		proof.NationalID, proof.ACR = id.NationalID, id.ACR
	}
	return proof, err
}

// consentRefused answers a decision or withdrawal the journey refused.
func (h *Handler) consentRefused(c echo.Context, frame pages.ConsentFrame, err error) error {
	var (
		closed *consent.ClosedError
		weak   *consent.AssuranceError
	)
	switch {
	case errors.Is(err, consent.ErrNotProven):
		// The sign-in ended (or never happened): back to the page to sign in.
		return c.Redirect(http.StatusSeeOther, "/consent/"+c.Param("token"))
	case errors.As(err, &closed):
		return h.consentClosed(c, frame, closed.Closure)
	case errors.Is(err, consent.ErrWrongPerson):
		return h.consentWrongPerson(c, frame)
	case errors.As(err, &weak):
		return h.consentNeedsStrongerEID(c, frame, weak)
	}
	return h.consentError(c, frame, err)
}

// HandleConsentProve handles "GET /consent/:token/login": off to the eID,
// back to the request afterwards. With again, the proven identity is
// forgotten first so that another person can sign in.
func (h *Handler) HandleConsentProve(c echo.Context) error {
	self := "/consent/" + c.Param("token")
	if h.cfg.ConsentAuth != "oidc" {
		return c.Redirect(http.StatusSeeOther, self)
	}
	if c.QueryParam("again") != "" {
		if err := httpkit.ReplaceSession(c, h.sessions, h.audit); err != nil {
			return err
		}
	}
	params := h.consentAuthParams(c)
	// A level asks the eID for a sign-in that reaches it.
	if acr := h.cfg.ConsentACRMap.ACR(assurance.Level(c.QueryParam("level"))); acr != "" {
		params.Set("acr_values", acr)
	}
	return httpkit.BeginLogin(c, h.rp, self, params)
}

// HandleConsentDecision handles "POST /consent/:token": Accept or Reject,
// final, then 303 to the organization's redirectUrl.
func (h *Handler) HandleConsentDecision(c echo.Context) error {
	frame := h.consentFrame(c)
	var accept bool
	switch c.FormValue("decision") {
	case "accept":
		accept = true
	case "reject":
	default:
		return echo.NewHTTPError(http.StatusBadRequest, "Choose Accept or Reject.")
	}
	proof, err := h.consentProof(c)
	if err != nil {
		return err
	}
	d, err := h.consent.Decide(c.Request().Context(), c.Param("token"), proof,
		consent.Answer{Accept: accept, Language: c.FormValue("lang")})
	if err != nil {
		return h.consentRefused(c, frame, err)
	}
	return c.Redirect(http.StatusSeeOther, withReceiptLink(d.RedirectURL, h.cfg.BaseURL.String()+"/consent/"+c.Param("token")))
}

// withReceiptLink adds receiptUrl to the redirect: the consent link, where
// the person finds their receipt and can withdraw, for the organization's
// page to offer.
func withReceiptLink(redirectURL, consentURL string) string {
	u, err := url.Parse(redirectURL)
	if err != nil {
		return redirectURL
	}
	q := u.Query()
	q.Set("receiptUrl", consentURL)
	u.RawQuery = q.Encode()
	return u.String()
}

// consentFrame is what every consent page shares: the language and its
// texts and switch. Consent pages are never cached: they hold a form token
// and must show a decision made in another tab, also after Back.
func (h *Handler) consentFrame(c echo.Context) pages.ConsentFrame {
	c.Response().Header().Set("Cache-Control", "no-store")
	lang := httpkit.PublicLang(c, h.cfg.Secure())
	return pages.ConsentFrame{Lang: lang, T: i18n.ConsentTexts(lang),
		SwitchURL: c.Request().URL.Path + "?lang=" + string(lang.Other()), Zone: h.cfg.PersonTimeZone}
}

// consentWrongPerson is the page of a proven identity that is not the one
// the request is for: it shows nothing of the request, only a way to sign in
// as someone else. The journey has recorded the mismatch.
func (h *Handler) consentWrongPerson(c echo.Context, frame pages.ConsentFrame) error {
	return httpkit.Render(c, http.StatusForbidden, pages.ConsentMessagePage(pages.ConsentMessage{
		ConsentFrame: frame, Title: frame.T.WrongPerson, Message: frame.T.WrongPersonHelp,
		ActionURL: "/consent/" + c.Param("token") + "/login?again=1", ActionLabel: frame.T.TryAnother,
	}))
}

// consentNeedsStrongerEID is the page of a sign-in below the level the
// consent requires: nothing was decided, and the way on is a new sign-in
// that asks the eID for the level.
func (h *Handler) consentNeedsStrongerEID(c echo.Context, frame pages.ConsentFrame, weak *consent.AssuranceError) error {
	return httpkit.Render(c, http.StatusForbidden, pages.ConsentMessagePage(pages.ConsentMessage{
		ConsentFrame: frame, Title: frame.T.StrongerEIDTitle,
		Message:     fmt.Sprintf(frame.T.StrongerEID, frame.T.Level(string(weak.Required))),
		ActionURL:   "/consent/" + c.Param("token") + "/login?again=1&level=" + url.QueryEscape(string(weak.Required)),
		ActionLabel: frame.T.SignInStronger,
	}))
}

func (h *Handler) consentClosed(c echo.Context, frame pages.ConsentFrame, why consent.Closure) error {
	msg := frame.T.AlreadyAnswered
	switch why {
	case consent.Cancelled:
		msg = frame.T.Cancelled
	case consent.Withdrawn:
		msg = frame.T.WithdrawnClosed
	case consent.Expired:
		msg = frame.T.Expired
	}
	return httpkit.Render(c, http.StatusGone, pages.ConsentMessagePage(pages.ConsentMessage{
		ConsentFrame: frame, Title: frame.T.ClosedTitle, Message: msg}))
}

func (h *Handler) consentError(c echo.Context, frame pages.ConsentFrame, err error) error {
	if errors.Is(err, consent.ErrUnknownLink) {
		return httpkit.Render(c, http.StatusNotFound, pages.ConsentMessagePage(pages.ConsentMessage{
			ConsentFrame: frame, Title: frame.T.NotFoundTitle, Message: frame.T.NotFoundHelp}))
	}
	return err
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
