package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/fieldcheck"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/views/layouts"
)

// This file holds what every console page shares (issue 8): the frame, the
// one form-binding helper, notices after a redirect, the audit trail, and
// how times read. The pages themselves are in console_*.go.

// consoleTime is how the console shows an instant: UTC, to the minute.
func consoleTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// consoleTimePtr shows an optional instant, or a dash.
func consoleTimePtr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return consoleTime(*t)
}

// frame builds the layout's view model for the signed-in staff member. The
// organization's name is looked up; an organization the identity module
// does not know (an external issuer's claim) shows its id.
func (s *Server) frame(c echo.Context, section, title string) layouts.Console {
	m := staffOf(c)
	name := m.Name
	if name == "" {
		name = m.Username
	}
	f := layouts.Console{Title: title, Section: section, StaffName: name, Username: m.Username, Role: string(m.Role),
		IsAdmin: m.IsAdmin(), OrgName: s.organizationName(c, m.OrganizationID), CSRF: csrfTokenOf(c), Notice: noticeOf(c)}
	f.Banner = s.endpointBanner(c, m.OrganizationID)
	return f
}

// organizationName is the organization's registered name, or its id when
// the identity module does not know it (an external issuer's claim).
func (s *Server) organizationName(c echo.Context, organizationID string) string {
	if s.orgs != nil {
		if org, err := s.orgs.Organization(c.Request().Context(), organizationID); err == nil {
			return org.Name
		}
	}
	return organizationID
}

// renderConsole renders a console page; console pages are never cached,
// since they show one organization's data to one person.
func (s *Server) renderConsole(c echo.Context, status int, page templ.Component) error {
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	return s.render(c, status, page)
}

// notices are the messages a redirect after an action may ask the next page
// to show; only their key (and a reference) travel in the URL.
var notices = map[string]string{
	"deleted":   "Flow %s was deleted. It is listed in the deletions log.",
	"cancelled": "Flow %s was cancelled; its consent link no longer works.",
	"withdrawn": "The consent of flow %s was withdrawn; a withdrawal receipt was signed.",
	"retried":   "The webhook delivery of %s is being retried now.",
	"revoked":   "API client %s was revoked. Its tokens stop working at once.",
	"keys":      "The keys of API client %s were replaced; assertions signed with other keys are refused.",
	"saved":     "Settings saved. New flows use them at once.",

	"endpoint_added":              "Webhook endpoint %s was added.",
	"endpoint_saved":              "Webhook endpoint %s was saved.",
	"endpoint_enabled":            "Webhook endpoint %s was enabled; it receives events again.",
	"endpoint_disabled":           "Webhook endpoint %s was disabled; it receives no events until it is enabled.",
	"endpoint_deleted":            "Webhook endpoint %s was deleted.",
	"recovery_started":            "The failed deliveries to %s are being sent again; the progress shows below.",
	"endpoint_enabled_recovering": "Webhook endpoint %s was enabled; the events it missed are being sent, the progress shows below.",
	"flow_urls_recovering":        "The failed deliveries to the flows' webhook URLs (%s) are being sent again; the progress shows below.",

	"redelivered":         "Event %s is being sent again to every destination it had.",
	"nothing_redelivered": "Event %s has no delivery to send again: the flow has no webhook URL and no endpoint received it.",

	"dpop_on":  "API client %s must now use DPoP: its token requests without a DPoP proof are refused.",
	"dpop_off": "API client %s no longer has to use DPoP; it may obtain bearer tokens again.",

	"session_ended":  "A session of %s was ended; that browser is signed out.",
	"sessions_ended": "Every session of %s was ended.",
	"others_ended":   "Every other session of yours was ended; only this browser is signed in.",
	"no_others":      "No other session of yours was live; only this browser is signed in.",

	"rate_limit": "The rate limit of API client %s was saved; every instance applies it within seconds.",
}

// withNotice adds a notice to a console path.
func withNotice(path, key, ref string) string {
	q := url.Values{"notice": {key}}
	if ref != "" {
		q.Set("ref", ref)
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + q.Encode()
}

func noticeOf(c echo.Context) string {
	msg, ok := notices[c.QueryParam("notice")]
	if !ok {
		return ""
	}
	ref := c.QueryParam("ref")
	if utf8.RuneCountInString(ref) > 80 {
		return ""
	}
	return strings.ReplaceAll(msg, "%s", ref)
}

// audited returns the hook that records a staff action in the audit log in
// the transaction of the action itself (database.BeforeCommit): the action
// and its entry commit together, or neither does, so that no action is done
// without a record and no record tells of an action that was not done.
// describe gives the entry's target and detail from what the action did.
func audited[T any](s *Server, c echo.Context, action string, describe func(done T) (target, detail string)) database.BeforeCommit[T] {
	return func(ctx context.Context, tx database.Tx, done T) error {
		target, detail := describe(done)
		return auditFailed(s.audit.RecordAuditTx(ctx, tx, auditEntry(c, action, target, detail)))
	}
}

// auditEntry is the audit log's entry of the signed-in staff member's action.
func auditEntry(c echo.Context, action, target, detail string) identity.AuditEntry {
	m := staffOf(c)
	return identity.AuditEntry{OrganizationID: m.OrganizationID, Actor: staffActor(m), Action: action, Target: target, Detail: detail}
}

// auditFirst records a staff action that changes nothing but shows
// something (a national id, a secret) before it is shown: the caller shows
// it only when this returns nil, so that nothing is revealed without a
// committed record of who saw it.
func (s *Server) auditFirst(c echo.Context, action, target, detail string) error {
	return auditFailed(s.audit.RecordAudit(c.Request().Context(), auditEntry(c, action, target, detail)))
}

// auditFailed makes a failure to record an action an internal error, which
// is logged with the request id and shown as a generic message, unless the
// database is unavailable (503). An Invalid entry is a fault of ours, not of
// the staff member's input: it must not come back as a form error.
func auditFailed(err error) error {
	if err == nil || apperr.CodeOf(err) == apperr.Unavailable {
		return err
	}
	return apperr.Wrap(err, apperr.Internal, "The action could not be recorded in the audit log, so it was not done.")
}

// staffActor is how a staff member appears in the deletion and audit logs.
func staffActor(m StaffMember) string { return "staff:" + m.Username }

// consoleForm is the one form-binding helper of the console: it reads a
// submitted form and collects an error per field, so that a refused form
// re-renders with what was typed and what is wrong with it.
type consoleForm struct {
	values url.Values
	Errors map[string]string
}

// bindForm reads the request's form.
func bindForm(c echo.Context) (*consoleForm, error) {
	v, err := c.FormParams()
	if err != nil {
		return nil, apperr.New(apperr.Invalid, "The form could not be read.")
	}
	return &consoleForm{values: v, Errors: map[string]string{}}, nil
}

// Text returns a trimmed field, noting an error when it is longer than max
// characters or contains control or formatting characters.
func (f *consoleForm) Text(name string, max int) string {
	v := strings.TrimSpace(f.values.Get(name))
	switch {
	case utf8.RuneCountInString(v) > max:
		f.Fail(name, "Use at most %d characters.", max)
	case strings.ContainsFunc(v, fieldcheck.IsControlOrFormat):
		f.Fail(name, "Remove the control and formatting characters.")
	}
	return v
}

// Bool reports whether a checkbox was ticked.
func (f *consoleForm) Bool(name string) bool {
	v := f.values.Get(name)
	return v == "true" || v == "on" || v == "1"
}

// All returns every value of a repeated field (checkboxes).
func (f *consoleForm) All(name string) []string { return f.values[name] }

// Lines returns the non-empty trimmed lines of a text area.
func (f *consoleForm) Lines(name string, maxLines int) []string {
	var out []string
	for _, l := range strings.Split(f.values.Get(name), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > maxLines {
		f.Fail(name, "List at most %d lines.", maxLines)
	}
	if slices.ContainsFunc(out, func(l string) bool { return strings.ContainsFunc(l, fieldcheck.IsControlOrFormat) }) {
		f.Fail(name, "Remove the control and formatting characters.")
	}
	return out
}

// Fail notes an error of a field; a field's errors are shown together.
func (f *consoleForm) Fail(name, format string, args ...any) {
	msg := apperr.New(apperr.Invalid, format, args...).Message
	if prev, ok := f.Errors[name]; ok {
		msg = prev + " " + msg
	}
	f.Errors[name] = msg
}

// Valid reports whether no field failed.
func (f *consoleForm) Valid() bool { return len(f.Errors) == 0 }

// Refused takes a module's apperr Invalid error and notes each of its fields
// under the form's name for it (fields maps module names to form names). It
// reports whether err was such an error; any other error is the caller's.
func (f *consoleForm) Refused(err error, fields map[string]string) bool {
	e, ok := apperr.As(err)
	if !ok || e.Code != apperr.Invalid {
		return false
	}
	for _, fe := range e.Fields {
		name, ok := fields[fe.Field]
		if !ok {
			name = fe.Field
		}
		f.Fail(name, "%s", sentence(fe.Message))
	}
	if len(e.Fields) == 0 {
		f.Fail("form", "%s", e.Message)
	}
	return true
}

// sentence makes a module's field message ("must be …") read as a sentence.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	r, size := utf8.DecodeRuneInString(msg)
	msg = strings.ToUpper(string(r)) + msg[size:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// handleConsoleHome handles "GET /console": the flows list is the console's home.
func (s *Server) handleConsoleHome(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, s.echo.Reverse("console.flows"))
}

// notFoundPage is the one answer for anything a staff member cannot see:
// unknown, deleted, or another organization's.
var errConsoleNotFound = apperr.New(apperr.NotFound, "There is nothing here, or it belongs to another organization.")

// consoleNotFound maps the modules' not-found errors to one 404.
func consoleNotFound(err error, sentinels ...error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return errConsoleNotFound
		}
	}
	return err
}
