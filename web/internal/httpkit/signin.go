package httpkit

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/oidclogin"
)

// This file holds the steps the sign-ins share: the relying parties' of
// the console and the person's pages (begin, finish, sign out), and what
// they and the built-in provider give the server's records of sessions:
// who, from where, and an audit entry for each end.

// SafeReturn accepts only a local path under prefix as where to go after
// sign-in, so that the sign-in cannot be turned into an open redirect.
func SafeReturn(raw, prefix, fallback string) string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(raw, prefix) || strings.HasPrefix(raw, "//") || strings.ContainsAny(raw, "\\\r\n") {
		return fallback
	}
	return raw
}

// BeginLogin sends the browser to rp's provider, to come back to returnTo.
func BeginLogin(c echo.Context, rp *oidclogin.RelyingParty, returnTo string, params url.Values) error {
	to, err := rp.Begin(c.Response(), c.Request(), returnTo, params)
	if errors.Is(err, oidclogin.ErrUnavailable) {
		return apperr.Wrap(err, apperr.Unavailable, "The sign-in service cannot be reached. Try again shortly.")
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// FinishLogin runs the callback checks and turns their failures into pages.
func FinishLogin(c echo.Context, log *slog.Logger, rp *oidclogin.RelyingParty, retry string) (oidclogin.Identity, bool, error) {
	id, err := rp.Finish(c.Response(), c.Request())
	if err == nil {
		return id, true, nil
	}
	// Every refusal is logged with its reason, which names no secret: the
	// code, state and tokens stay out of Finish's errors.
	log.WarnContext(c.Request().Context(), "sign-in not completed", "relyingParty", rp.Name(), "error", err.Error())
	var pe *oidclogin.ProviderError
	switch {
	case errors.Is(err, oidclogin.ErrState):
		return id, false, RenderNotice(c, http.StatusBadRequest, "Sign-in expired",
			"This sign-in was not started in this browser, was used already, or took too long.", retry, "Sign in again")
	case errors.As(err, &pe):
		return id, false, RenderNotice(c, http.StatusUnauthorized, "Sign-in not completed",
			"The sign-in service answered: "+pe.Code+".", retry, "Try again")
	case errors.Is(err, oidclogin.ErrRejected):
		return id, false, RenderNotice(c, http.StatusUnauthorized, "Sign-in failed",
			"The answer of the sign-in service did not pass our checks.", retry, "Try again")
	case errors.Is(err, oidclogin.ErrUnavailable):
		return id, false, apperr.Wrap(err, apperr.Unavailable, "The sign-in service cannot be reached. Try again shortly.")
	default:
		return id, false, err
	}
}

// Logout ends the session of store here, with its record and those of its
// sign-in (a console session's provider session), each in audit, then at
// the provider.
func Logout(c echo.Context, store *oidclogin.Sessions, rp *oidclogin.RelyingParty, audit AuditLog, signedOut string) error {
	sess, ok, err := store.Get(c.Response(), c.Request())
	if err != nil {
		return err
	}
	if !ok {
		return c.Redirect(http.StatusSeeOther, signedOut)
	}
	if !CSRFMatches(c, sess.CSRF) {
		return apperr.New(apperr.Forbidden, "This form has expired. Reload the page and try again.")
	}
	if _, err := store.End(c.Response(), c.Request(), sess, SignedOut(audit)); err != nil {
		return err
	}
	if rp != nil {
		if to := rp.LogoutURL(c.Request().Context(), sess.IDToken); to != "" {
			return c.Redirect(http.StatusSeeOther, to)
		}
	}
	return c.Redirect(http.StatusSeeOther, signedOut)
}

// CSRFMatches reports whether the request carries want, the session's CSRF
// token, in the form field csrf or the header X-CSRF-Token.
func CSRFMatches(c echo.Context, want string) bool {
	got := c.Request().Header.Get("X-CSRF-Token")
	if got == "" {
		got = c.FormValue("csrf")
	}
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// StaffRecord is what a staff session's record holds besides its times:
// the session's id when promised before (sid), the account, and the browser
// and address it was signed in from.
// An external issuer's username, or a forwarded address, longer than the
// record holds is cut short rather than refusing the sign-in.
func StaffRecord(c echo.Context, id, staffID, organizationID, username string) staff.Session {
	return staff.Session{ID: id, StaffID: staffID, OrganizationID: organizationID, Username: TruncateRunes(username, 320),
		UserAgent: staff.SummarizeUserAgent(c.Request().UserAgent()), Address: TruncateRunes(c.RealIP(), 64)}
}

// ReplaceSession ends the session of store that the browser brings to a
// new sign-in, so that a copy of its cookie does not outlive it.
func ReplaceSession(c echo.Context, store *oidclogin.Sessions, audit AuditLog) error {
	return store.Replace(c.Response(), c.Request(), SessionsEnded(audit, "", staff.EndedBySignIn))
}

// SignedOut records, in the transaction of a sign-out, an entry of each
// staff session it ended, by the person who signed out.
func SignedOut(audit AuditLog) database.BeforeCommit[[]staff.Session] {
	return SessionsEnded(audit, "", "")
}

// SessionsEnded records, in the transaction that ended them, an entry of
// each staff session ended (staff.SessionAuditEntries), by actor, or by
// each session's own person when actor is "".
func SessionsEnded(audit AuditLog, actor, why string) database.BeforeCommit[[]staff.Session] {
	return func(ctx context.Context, tx database.Tx, ended []staff.Session) error {
		for _, one := range ended {
			by := actor
			if by == "" {
				by = "staff:" + one.Username
			}
			for _, e := range staff.SessionAuditEntries(by, why, []staff.Session{one}) {
				if err := audit.RecordAuditTx(ctx, tx, e); err != nil {
					return AuditFailed(err)
				}
			}
		}
		return nil
	}
}
