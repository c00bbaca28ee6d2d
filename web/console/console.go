// Package console is the staff console under /console: an organization's
// flows, consent definitions, webhooks, settings and audit log, for its
// staff signed in through OpenID Connect. The pages of its API clients and
// sessions are in web/console/access, which shares this package's frame,
// rendering, notices and audit trail (Handler.Frame, Handler.Render,
// Audited, WithNotice). Its routes are in web/routes.go, behind
// RequireStaff, and RequireAdmin for changes.
package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/idempotency"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/modules/ssf"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/views/layouts"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/oidclogin"
)

// Deps are what the console's handlers call.
type Deps struct {
	Log    *slog.Logger
	Config *config.Config
	// Organizations and Clients are identity's organizations and their API
	// clients; Audit is the audit log.
	Organizations orgs.Organizations
	Clients       orgs.Clients
	Audit         audit.Log
	Flows         flows.Service
	// Withdrawals withdraw accepted consents.
	Withdrawals consent.Withdrawals
	Webhooks    webhooks.Service
	Endpoints   webhooks.Endpoints
	Definitions consent.Definitions
	// Consent tells when a flow's person proved who they are.
	Consent consent.Journey
	// Idempotency keeps the API's answers, which a flow's deletion takes along.
	Idempotency idempotency.Store
	// Sessions are the records of everyone's sessions; StaffSessions the
	// console's own, signed in through RP.
	Sessions      staff.Sessions
	StaffSessions *oidclogin.Sessions
	RP            *oidclogin.RelyingParty
	// BuiltInIssuer is the built-in provider's issuer, whose staff the
	// console knows by account.
	BuiltInIssuer string
	// Erasures erases people from the organization.
	Erasures erasure.Service
	// Resources are the resources the organization serves as a data holder.
	Resources consent.Resources
	// Notices say which data holders were told that a consent ended; nil
	// shows none.
	Notices ssf.Notices
	// Streams are the organization's Shared Signals streams with their
	// backlogs; nil lists none.
	Streams ssf.Health
}

// Handler holds the console's handlers.
type Handler struct {
	log           *slog.Logger
	cfg           *config.Config
	orgs          orgs.Organizations
	clients       orgs.Clients
	audit         audit.Log
	flows         flows.Service
	withdrawals   consent.Withdrawals
	webhooks      webhooks.Service
	endpoints     webhooks.Endpoints
	definitions   consent.Definitions
	consent       consent.Journey
	answers       idempotency.Store
	sessions      staff.Sessions
	staffSessions *oidclogin.Sessions
	rp            *oidclogin.RelyingParty
	builtInIssuer string
	erasures      erasure.Service
	resources     consent.Resources
	notices       ssf.Notices
	streams       ssf.Health
}

// New returns the console's handlers, calling the modules of d.
func New(d Deps) *Handler {
	return &Handler{log: d.Log, cfg: d.Config, orgs: d.Organizations, clients: d.Clients, audit: d.Audit, flows: d.Flows, withdrawals: d.Withdrawals, webhooks: d.Webhooks, endpoints: d.Endpoints,
		definitions: d.Definitions, consent: d.Consent, answers: d.Idempotency, sessions: d.Sessions,
		staffSessions: d.StaffSessions, rp: d.RP, builtInIssuer: d.BuiltInIssuer, erasures: d.Erasures, resources: d.Resources,
		notices: d.Notices, streams: d.Streams}
}

// This file holds what every console page shares besides: the frame,
// notices after a redirect, the audit trail, and how times read.

// Time is how the console shows an instant: UTC, to the minute.
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// TimePtr shows an optional instant, or a dash.
func TimePtr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return Time(*t)
}

// Frame builds the layout's view model for the signed-in staff member. The
// organization's name is looked up; an organization the identity module
// does not know (an external issuer's claim) shows its id.
func (h *Handler) Frame(c echo.Context, section, title string) layouts.Console {
	m := StaffOf(c)
	name := m.Name
	if name == "" {
		name = m.Username
	}
	f := layouts.Console{Title: title, Section: section, StaffName: name, Username: m.Username, Role: string(m.Role),
		IsAdmin: m.IsAdmin(), OrgName: h.organizationName(c, m.OrganizationID), CSRF: csrfTokenOf(c), Notice: noticeOf(c)}
	f.Banner = h.endpointBanner(c, m.OrganizationID)
	return f
}

// organizationName is the organization's registered name, or its id when
// the identity module does not know it (an external issuer's claim).
func (h *Handler) organizationName(c echo.Context, organizationID string) string {
	if org, err := h.orgs.Organization(c.Request().Context(), organizationID); err == nil {
		return org.Name
	}
	return organizationID
}

// Render renders a console page; console pages are never cached,
// since they show one organization's data to one person.
func (h *Handler) Render(c echo.Context, status int, page templ.Component) error {
	header := c.Response().Header()
	header.Set("Cache-Control", "no-store")
	header.Set("Pragma", "no-cache")
	return httpkit.Render(c, status, page)
}

// notices are the messages a redirect after an action may ask the next page
// to show; only their key (and a reference) travel in the URL.
var notices = map[string]string{
	"deleted":          "Flow %s was deleted. It is listed in the deletions log.",
	"cancelled":        "Flow %s was cancelled; its consent link no longer works.",
	"withdrawn":        "The consent of flow %s was withdrawn; a withdrawal receipt was signed.",
	"retried":          "The webhook delivery of %s is being retried now.",
	"delivery_retried": "The webhook delivery is being sent again now.",
	"revoked":          "API client %s was revoked. Its tokens stop working at once.",
	"keys":             "The keys of API client %s were replaced; assertions signed with other keys are refused.",
	"saved":            "Settings saved. New flows use them at once.",

	"endpoint_added":              "Webhook endpoint %s was added.",
	"endpoint_saved":              "Webhook endpoint %s was saved.",
	"endpoint_enabled":            "Webhook endpoint %s was enabled; it receives events again.",
	"endpoint_disabled":           "Webhook endpoint %s was disabled; it receives no events until it is enabled.",
	"endpoint_deleted":            "Webhook endpoint %s was deleted.",
	"recovery_started":            "The failed deliveries to %s are being sent again; the progress shows below.",
	"endpoint_enabled_recovering": "Webhook endpoint %s was enabled; the events it missed are being sent, the progress shows below.",
	"flow_urls_recovering":        "The failed deliveries to the flows' webhook URLs (%s) are being sent again; the progress shows below.",
	"test_event_sent":             "A test event (%s) is on its way.",
	"signing_key_rotated":         "A new signing key (%s) signs now; the previous one signs beside it for 24 hours.",

	"redelivered":         "Event %s is being sent again to every destination it had.",
	"nothing_redelivered": "Event %s has no delivery to send again: the flow has no webhook URL and no endpoint received it.",

	"dpop_on":  "API client %s must now use DPoP: its token requests without a DPoP proof are refused.",
	"dpop_off": "API client %s no longer has to use DPoP; it may obtain bearer tokens again.",

	"session_ended":  "A session of %s was ended; that browser is signed out.",
	"sessions_ended": "Every session of %s was ended.",
	"others_ended":   "Every other session of yours was ended; only this browser is signed in.",
	"no_others":      "No other session of yours was live; only this browser is signed in.",

	"rate_limit": "The rate limit of API client %s was saved; every instance applies it within seconds.",

	"erased":           "The person was erased: %s flows. The erasure receipt is listed below.",
	"resource_created": "Resource %s was registered.",

	"erased_before": "Nothing of the person was left: they were erased before, as listed below.",
}

// WithNotice adds a notice to a console path.
func WithNotice(path, key, ref string) string {
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

// Audited returns the hook that records a staff action in the audit log in
// the transaction of the action itself (database.BeforeCommit): the action
// and its entry commit together, or neither does, so that no action is done
// without a record and no record tells of an action that was not done.
// describe gives the entry's target and detail from what the action did.
func Audited[T any](h *Handler, c echo.Context, action string, describe func(done T) (target, detail string)) database.BeforeCommit[T] {
	return func(ctx context.Context, tx database.Tx, done T) error {
		target, detail := describe(done)
		return httpkit.AuditFailed(h.audit.RecordAuditTx(ctx, tx, auditEntry(c, action, target, detail)))
	}
}

// auditEntry is the audit log's entry of the signed-in staff member's action.
func auditEntry(c echo.Context, action, target, detail string) identity.AuditEntry {
	m := StaffOf(c)
	return identity.AuditEntry{OrganizationID: m.OrganizationID, Actor: StaffActor(m), Action: action, Target: target, Detail: detail}
}

// AuditFirst records a staff action that changes nothing but shows
// something (a national id, a secret) before it is shown: the caller shows
// it only when this returns nil, so that nothing is revealed without a
// committed record of who saw it.
func (h *Handler) AuditFirst(c echo.Context, action, target, detail string) error {
	return httpkit.AuditFailed(h.audit.RecordAudit(c.Request().Context(), auditEntry(c, action, target, detail)))
}

// StaffActor is how a staff member appears in the deletion and audit logs.
func StaffActor(m StaffMember) string { return "staff:" + m.Username }

// HandleConsoleHome handles "GET /console": the flows list is the console's home.
func (h *Handler) HandleConsoleHome(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, c.Echo().Reverse("console.flows"))
}

// notFoundPage is the one answer for anything a staff member cannot see:
// unknown, deleted, or another organization's.
var ErrNotFound = apperr.New(apperr.NotFound, "There is nothing here, or it belongs to another organization.")

// NotFound maps the modules' not-found errors to one 404.
func NotFound(err error, sentinels ...error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return ErrNotFound
		}
	}
	return err
}
