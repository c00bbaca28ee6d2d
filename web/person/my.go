package person

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// This file is the person's own page, /my: after the same eID sign-in as
// a consent link, every consent request addressed to them in every
// organization, and the withdrawal of any consent they gave.

// sessionCSRFField is the form field the consent session's token travels
// in (httpkit.CSRFMatches).
const sessionCSRFField = "csrf"

// myFrame is the consent pages' frame with the page's own texts.
func (h *Handler) myFrame(c echo.Context) pages.MyFrame {
	frame := h.consentFrame(c)
	return pages.MyFrame{ConsentFrame: frame, M: i18n.MyTexts(frame.Lang)}
}

// myProof is the person signed in on the consent session, if anyone.
func (h *Handler) myProof(c echo.Context) (consent.Proof, ConsentIdentity, bool, error) {
	id, ok, err := h.consentIdentityOf(c)
	if err != nil || !ok {
		return consent.Proof{}, ConsentIdentity{}, false, err
	}
	return consent.Proof{NationalID: id.NationalID, ACR: id.ACR, Session: id.Session}, id, true, nil
}

// myForm admits a POST of the page's forms: a signed-in person, with the
// session's CSRF token, within the limit on their writes (MyWrites in
// MyWriteWindow). When it does not, it has answered and ok is false; the
// handler returns err.
func (h *Handler) myForm(c echo.Context, f pages.MyFrame) (proof consent.Proof, ok bool, err error) {
	proof, id, ok, err := h.myProof(c)
	switch {
	case err != nil:
		return consent.Proof{}, false, err
	case !ok:
		return consent.Proof{}, false, c.Redirect(http.StatusSeeOther, "/my")
	case !httpkit.CSRFMatches(c, id.CSRF):
		return consent.Proof{}, false, h.myMessage(c, f, http.StatusForbidden, f.T.FormExpiredTitle, f.T.FormExpired)
	}
	if wait, ok := h.writes.Take(personKey(id)); !ok {
		minutes := int((wait + time.Minute - 1) / time.Minute)
		c.Response().Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		return consent.Proof{}, false, h.myMessage(c, f, http.StatusTooManyRequests, f.M.TooManyTitle, fmt.Sprintf(f.M.TooMany, minutes))
	}
	return proof, true, nil
}

// personKey is what the limit on the page's writes counts a person by: the
// eID's own name for them, digested, so that no national id is kept.
func personKey(id ConsentIdentity) string {
	sum := sha256.Sum256([]byte(id.Issuer + "\x00" + id.Subject))
	return string(sum[:])
}

// HandleMy handles "GET /my": the sign-in, then every consent request
// addressed to the person.
func (h *Handler) HandleMy(c echo.Context) error {
	f := h.myFrame(c)
	if h.cfg.ConsentAuth != "oidc" {
		return h.myUnavailable(c, f)
	}
	proof, id, ok, err := h.myProof(c)
	if err != nil {
		return err
	}
	if !ok {
		return httpkit.Render(c, http.StatusOK, pages.MySignInPage(pages.MySignIn{MyFrame: f, LoginURL: "/my/login", TestEID: h.cfg.TestEID}))
	}
	var erasures func(context.Context) ([]erasure.PersonRequest, error)
	mine, err := h.mine.Mine(c.Request().Context(), proof, func(b *database.Batch) {
		erasures = h.erasures.QueueRequestsOf(b, proof.NationalID)
	})
	if err != nil {
		return err
	}
	page := pages.MyConsents{MyFrame: f, VerifyURL: "/receipts/verify", LogoutURL: "/consent/auth/logout",
		CSRFField: sessionCSRFField, CSRFToken: id.CSRF}
	now := time.Now()
	for _, m := range mine {
		switch {
		case m.Hidden:
			page.Hidden = append(page.Hidden, pages.MyHidden{
				Message:  fmt.Sprintf(f.M.Hidden, f.T.Level(string(m.Text.AssuranceLevel))),
				LoginURL: strongerLogin(m.Text.AssuranceLevel)})
		case m.Closure == consent.Open:
			page.Unanswered = append(page.Unanswered, myConsentCard(f, m, now))
		default:
			page.Answered = append(page.Answered, myConsentCard(f, m, now))
		}
	}
	if err := h.addNotices(c.Request().Context(), f, mine, page.Answered); err != nil {
		return err
	}
	asked, err := erasures(c.Request().Context())
	if err != nil {
		return err
	}
	page.Erasures = myErasures(f, mine, asked)
	return httpkit.Render(c, http.StatusOK, pages.MyConsentsPage(page))
}

// strongerLogin is the sign-in that asks the eID for level.
func strongerLogin(level assurance.Level) string {
	return "/my/login?again=1&level=" + url.QueryEscape(string(level))
}

// HandleMyLogin handles "GET /my/login": off to the eID, back to /my. With
// again, the identity signed in is forgotten first; level asks the eID for
// a sign-in that reaches it.
func (h *Handler) HandleMyLogin(c echo.Context) error {
	if h.cfg.ConsentAuth != "oidc" {
		return c.Redirect(http.StatusSeeOther, "/my")
	}
	if c.QueryParam("again") != "" {
		if err := httpkit.ReplaceSession(c, h.sessions, h.audit); err != nil {
			return err
		}
	}
	params := h.consentAuthParams(c)
	if acr := h.cfg.ConsentACRMap.ACR(assurance.Level(c.QueryParam("level"))); acr != "" {
		params.Set("acr_values", acr)
	}
	return httpkit.BeginLogin(c, h.rp, "/my", params)
}

// HandleMyWithdrawPage handles "GET /my/:flow/withdraw": what withdrawing
// the consent means, and the form that does it.
func (h *Handler) HandleMyWithdrawPage(c echo.Context) error {
	f := h.myFrame(c)
	proof, id, ok, err := h.myProof(c)
	if err != nil {
		return err
	}
	if !ok {
		return c.Redirect(http.StatusSeeOther, "/my")
	}
	mine, err := h.mine.Mine(c.Request().Context(), proof, nil)
	if err != nil {
		return err
	}
	for _, m := range mine {
		if m.FlowID != c.Param("flow") {
			continue
		}
		if m.Hidden {
			return h.myNeedsStrongerEID(c, f, m.Text.AssuranceLevel)
		}
		if m.Status != flows.Accepted {
			break
		}
		return httpkit.Render(c, http.StatusOK, pages.MyConfirmPage(pages.MyConfirm{MyFrame: f,
			Consent:      myConsentCard(f, m, time.Now()),
			Consequences: httpkit.TextBlocksOf(httpkit.WithdrawalConsequencesOf(m.Text, f.ConsentFrame)),
			ActionURL:    "/my/" + url.PathEscape(m.FlowID) + "/withdraw", CSRFField: sessionCSRFField, CSRFToken: id.CSRF}))
	}
	return h.myMessage(c, f, http.StatusNotFound, f.M.Title, f.M.NotYours)
}

// HandleMyWithdraw handles "POST /my/:flow/withdraw": the withdrawal the
// consent link makes, with the consent session's CSRF token.
func (h *Handler) HandleMyWithdraw(c echo.Context) error {
	f := h.myFrame(c)
	proof, ok, err := h.myForm(c, f)
	if !ok {
		return err
	}
	r, err := h.mine.WithdrawMine(c.Request().Context(), proof, c.Param("flow"))
	var (
		weak   *consent.AssuranceError
		closed *consent.ClosedError
	)
	switch {
	case errors.As(err, &weak):
		return h.myNeedsStrongerEID(c, f, weak.Required)
	case errors.Is(err, consent.ErrNotYours), errors.Is(err, consent.ErrWrongPerson):
		return h.myMessage(c, f, http.StatusNotFound, f.M.Title, f.M.NotYours)
	case errors.As(err, &closed):
		return h.myMessage(c, f, http.StatusGone, f.T.ClosedTitle, f.T.WithdrawnClosed)
	case err != nil:
		return err
	}
	return httpkit.Render(c, http.StatusOK, pages.MyWithdrawnPage(pages.MyWithdrawn{MyFrame: f,
		Message:  withdrawnMessage(f.T, r.Receipt),
		Receipts: []pages.ReceiptCard{receiptCard(f.ConsentFrame, r.Receipt, r.JWS)}, VerifyURL: "/receipts/verify"}))
}

func (h *Handler) myNeedsStrongerEID(c echo.Context, f pages.MyFrame, level assurance.Level) error {
	return httpkit.Render(c, http.StatusForbidden, pages.ConsentMessagePage(pages.ConsentMessage{
		ConsentFrame: f.ConsentFrame, Title: f.T.StrongerEIDTitle,
		Message:     fmt.Sprintf(f.T.StrongerEID, f.T.Level(string(level))),
		ActionURL:   strongerLogin(level),
		ActionLabel: f.T.SignInStronger,
	}))
}

func (h *Handler) myMessage(c echo.Context, f pages.MyFrame, status int, title, message string) error {
	return httpkit.Render(c, status, pages.ConsentMessagePage(pages.ConsentMessage{ConsentFrame: f.ConsentFrame,
		Title: title, Message: message, ActionURL: "/my", ActionLabel: f.M.BackToMy}))
}

// myUnavailable answers /my where no eID proves who people are
// (FLOWD_CONSENT_AUTH=none): nobody could be shown their own consents.
func (h *Handler) myUnavailable(c echo.Context, f pages.MyFrame) error {
	return httpkit.Render(c, http.StatusNotFound, pages.ConsentMessagePage(pages.ConsentMessage{ConsentFrame: f.ConsentFrame,
		Title: f.T.NotFoundTitle, Message: f.M.SignInHelp}))
}

// myConsentCard writes a request out for the page, in its language.
func myConsentCard(f pages.MyFrame, m consent.MyConsent, now time.Time) pages.MyConsent {
	card := pages.MyConsent{FlowID: m.FlowID, Organization: m.OrganizationName,
		Text: httpkit.ConsentTextOf(m.Text, m.Parameters, m.OrganizationName, f.ConsentFrame), Reference: m.ReferenceID,
		Status: myStatus(f.M, m), ConsentURL: m.ConsentURL}
	if m.Status == flows.Accepted || m.Status == flows.Withdrawn || m.Status == flows.Expired {
		if m.DecidedAt != nil {
			card.Given = f.Date(*m.DecidedAt)
		}
		if m.ValidUntil != nil {
			card.ValidUntil = f.Date(*m.ValidUntil)
			if m.Status == flows.Accepted {
				switch days := consent.DaysLeft(*m.ValidUntil, now, f.Location()); days {
				case 0:
					card.ExpiresIn = f.M.ExpiresToday
				case 1:
					card.ExpiresIn = f.M.ExpiresTomorrow
				default:
					card.ExpiresIn = fmt.Sprintf(f.M.ExpiresIn, days)
				}
			}
		}
		if m.LastUsedAt != nil {
			card.LastUsed = f.Date(*m.LastUsedAt)
		}
		if m.Expiring && m.Status == flows.Accepted {
			card.Expiring = f.M.Expiring
		}
	}
	if m.Status == flows.Accepted {
		card.WithdrawURL = "/my/" + url.PathEscape(m.FlowID) + "/withdraw"
	}
	for _, step := range m.History {
		card.History = append(card.History, pages.MyHappening{When: f.Date(step.At), What: myHappening(f.M, step)})
	}
	for _, r := range m.Receipts {
		card.Receipts = append(card.Receipts, receiptCard(f.ConsentFrame, r.Receipt, r.JWS))
	}
	return card
}

func myStatus(t i18n.My, m consent.MyConsent) string {
	switch m.Status {
	case flows.Accepted:
		return t.StatusAccepted
	case flows.Rejected:
		return t.StatusRejected
	case flows.Withdrawn:
		return t.StatusWithdrawn
	case flows.Expired:
		return t.StatusExpired
	}
	if m.Closure != consent.Open {
		return t.StatusClosed
	}
	if m.Status == flows.Opened {
		return t.StatusOpened
	}
	return t.StatusUnopened
}

func myHappening(t i18n.My, h consent.Happening) string {
	switch h.Kind {
	case consent.HappenedAsked:
		return t.Asked
	case consent.HappenedOpened:
		return t.Opened
	case consent.HappenedAccepted:
		return t.Accepted
	case consent.HappenedRejected:
		return t.Rejected
	case consent.HappenedWithdrawn:
		if h.By == flows.ByOrganization {
			return t.WithdrawnByOr
		}
		return t.Withdrawn
	case consent.HappenedExpired:
		return t.Expired
	case consent.HappenedUsed:
		if h.Resource != "" {
			name := h.Resource
			if h.ResourceName != "" {
				name = h.ResourceName + " (" + h.Resource + ")"
			}
			return fmt.Sprintf(t.SharedWith, name)
		}
		if h.Action != "" {
			return t.Used + ": " + h.Action
		}
		return t.Used
	case consent.HappenedExpiring:
		return t.Expiring
	}
	return h.Kind
}

// addNotices puts on each answered card whose consent ended the data
// holders told of it (Shared Signals), in order with mine.
func (h *Handler) addNotices(ctx context.Context, f pages.MyFrame, mine []consent.MyConsent, cards []pages.MyConsent) error {
	if h.notices == nil {
		return nil
	}
	byFlow := map[string]consent.MyConsent{}
	for _, m := range mine {
		byFlow[m.FlowID] = m
	}
	for i := range cards {
		m := byFlow[cards[i].FlowID]
		if m.Status != flows.Withdrawn && m.Status != flows.Expired {
			continue
		}
		told, err := h.notices.NoticesOf(ctx, m.OrganizationID, m.FlowID)
		if err != nil {
			return err
		}
		cards[i].Told = NoticeViews(told, f.ConsentFrame)
	}
	return nil
}

// NoticeViews writes notices out for a page, dates and times in the
// frame's language and zone.
func NoticeViews(told []ssf.Notice, f pages.ConsentFrame) []pages.ToldNotice {
	out := make([]pages.ToldNotice, len(told))
	for i, n := range told {
		out[i] = pages.ToldNotice{DataHolder: n.DataHolderName, Sent: dateTime(f, n.SentAt), Rejected: n.Rejected}
		if out[i].DataHolder == "" {
			out[i].DataHolder = n.DataHolderID
		}
		if n.Acknowledged != nil {
			out[i].Acknowledged = dateTime(f, *n.Acknowledged)
		}
	}
	return out
}

func dateTime(f pages.ConsentFrame, t time.Time) string {
	return f.Date(t) + " " + t.In(f.Location()).Format("15:04:05")
}
