package console

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// This file holds the console's replay of webhooks: an endpoint's page,
// where admins recover what it missed and everyone follows the recoveries'
// progress; the recovery of the flows' own webhook URLs on the webhooks
// page; and the redelivery of a flow's event.

// recoveryRefresh is how often, in seconds, an endpoint's page reloads
// while one of its recoveries is under way.
const recoveryRefresh = 2

// sinceLayout is the value of a datetime-local input, to the second.
const sinceLayout = "2006-01-02T15:04:05"

// parseSince reads the recovery form's time, in UTC: a datetime-local
// value, with or without seconds.
func parseSince(v string) (time.Time, bool) {
	for _, layout := range []string{sinceLayout, "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// endpointEvents is how the console names an endpoint's event types.
func endpointEvents(e webhooks.Endpoint) string {
	if len(e.EventTypes) == 0 {
		return "All events"
	}
	names := make([]string, len(e.EventTypes))
	for i, t := range e.EventTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// dayAgo is what a recovery form proposes: the last 24 hours.
func dayAgo() string {
	return time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Minute).Format(sinceLayout)
}

// recoveryRows are the rows of recoveries, and whether one is under way.
func recoveryRows(list []webhooks.Recovery) (rows []pages.RecoveryRow, active bool) {
	for _, r := range list {
		host := r.Host
		if host == "" {
			host = "every host"
		}
		rows = append(rows, pages.RecoveryRow{ID: r.ID, Requested: Time(r.CreatedAt),
			Since: r.Since.UTC().Format("2006-01-02 15:04:05 UTC"), Host: host, RequestedBy: r.RequestedBy, State: string(r.State),
			Scheduled: r.Scheduled, Total: r.Total, Finished: TimePtr(r.FinishedAt, ""), Error: r.Error})
		active = active || r.State.Active()
	}
	return rows, active
}

// renderEndpoint renders an endpoint's page with status, the recovery form
// holding since and errs.
func (h *Handler) renderEndpoint(c echo.Context, status int, e webhooks.Endpoint, since string, errs map[string]string) error {
	list, err := h.webhooks.Recoveries(c.Request().Context(), StaffOf(c).OrganizationID, e.ID)
	if err != nil {
		return NotFound(err, webhooks.ErrEndpointNotFound)
	}
	p := pages.EndpointPage{Frame: h.Frame(c, "webhooks", "Webhook endpoint"), ID: e.ID, URL: e.URL, Description: OrDash(e.Description),
		Events: endpointEvents(e), Enabled: e.Enabled, DisabledReason: e.DisabledReason, Created: Time(e.CreatedAt),
		Since: since, Errors: errs}
	// A refusal of the whole request shows above the page: the form is not
	// there for a disabled endpoint.
	p.Frame.Error = errs["form"]
	var active bool
	if p.Recoveries, active = recoveryRows(list); active {
		p.Frame.Refresh = recoveryRefresh
	}
	return h.Render(c, status, pages.Endpoint(p))
}

// HandleConsoleEndpoint handles "GET /console/webhooks/:id": the endpoint
// and its recoveries; the form proposes the last 24 hours.
func (h *Handler) HandleConsoleEndpoint(c echo.Context) error {
	e, err := h.consoleEndpoint(c)
	if err != nil {
		return err
	}
	return h.renderEndpoint(c, http.StatusOK, e, dayAgo(), nil)
}

// auditedRecovery records a staff member's recovery in the audit log, in
// the request's transaction: one of an endpoint by the endpoint, one of the
// flows' own URLs by its id.
func (h *Handler) auditedRecovery(c echo.Context) database.BeforeCommit[webhooks.Recovery] {
	return func(ctx context.Context, tx database.Tx, r webhooks.Recovery) error {
		action, target := identity.AuditWebhookEndpointRecover, r.EndpointID
		if r.EndpointID == "" {
			action, target = identity.AuditWebhookRecover, r.ID
		}
		return httpkit.AuditFailed(h.audit.RecordAuditTx(ctx, tx, auditEntry(c, action, target, httpkit.RecoveryAudit(r))))
	}
}

// recoveryRefused renders the endpoint's page with the refusal err of a
// recovery of e since raw: beside the time when it was the time's, above
// the page when it was a conflict (one is running).
func (h *Handler) recoveryRefused(c echo.Context, f *httpkit.Form, e webhooks.Endpoint, raw string, err error) error {
	if f.Refused(err, nil) {
		return h.renderEndpoint(c, http.StatusBadRequest, e, raw, f.Errors)
	}
	err = httpkit.RecoveryError(c.Request().Context(), h.webhooks, StaffOf(c).OrganizationID, e.ID, err)
	if ae, ok := apperr.As(err); ok && ae.Code == apperr.Conflict {
		f.Fail("form", "%s", ae.Message)
		return h.renderEndpoint(c, http.StatusConflict, e, raw, f.Errors)
	}
	return NotFound(err, webhooks.ErrEndpointNotFound)
}

// HandleConsoleRecover handles "POST /console/webhooks/:id/recover"
// (admins): what the endpoint missed since the form's time is sent in the
// background; the request and its audit entry commit together.
func (h *Handler) HandleConsoleRecover(c echo.Context) error {
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	e, err := h.consoleEndpoint(c)
	if err != nil {
		return err
	}
	raw := strings.TrimSpace(f.Value("since"))
	since, ok := parseSince(raw)
	if raw != "" && !ok {
		f.Fail("since", "Give a date and time, such as 2026-01-02T03:04.")
		return h.renderEndpoint(c, http.StatusBadRequest, e, raw, f.Errors)
	}
	m := StaffOf(c)
	if _, err = h.webhooks.Recover(c.Request().Context(), m.OrganizationID, e.ID, since, StaffActor(m), h.auditedRecovery(c)); err != nil {
		return h.recoveryRefused(c, f, e, raw, err)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice(c.Echo().Reverse("console.webhook", e.ID), "recovery_started", endpointHost(e)))
}

// HandleConsoleRecoverFlowURLs handles "POST /console/webhooks/recover"
// (admins): the failed deliveries to the flows' own webhook URLs (of the
// form's host, when given) since the form's time are sent again in the
// background; the request and its audit entry commit together.
func (h *Handler) HandleConsoleRecoverFlowURLs(c echo.Context) error {
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	raw := strings.TrimSpace(f.Value("since"))
	host := f.Text("host", webhooks.MaxRecoveryHost)
	since, ok := parseSince(raw)
	if raw != "" && !ok {
		f.Fail("since", "Give a date and time, such as 2026-01-02T03:04.")
	}
	if !f.Valid() {
		return h.renderEndpoints(c, http.StatusBadRequest, raw, host, f.Errors)
	}
	ctx, m := c.Request().Context(), StaffOf(c)
	_, err = h.webhooks.RecoverFlowURLs(ctx, m.OrganizationID, since, host, StaffActor(m), h.auditedRecovery(c))
	if f.Refused(err, nil) {
		return h.renderEndpoints(c, http.StatusBadRequest, raw, host, f.Errors)
	}
	if err != nil {
		err = httpkit.RecoveryError(ctx, h.webhooks, m.OrganizationID, "", err)
		if ae, ok := apperr.As(err); ok && ae.Code == apperr.Conflict {
			f.Fail("form", "%s", ae.Message)
			return h.renderEndpoints(c, http.StatusConflict, raw, host, f.Errors)
		}
		return err
	}
	ref := strings.ToLower(host)
	if ref == "" {
		ref = "every host"
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/webhooks", "flow_urls_recovering", ref)+"#flow-urls")
}

// HandleConsoleRedeliver handles "POST /console/flows/:id/events/:event/redeliver"
// (admins): the flow's event goes out again now to every destination it
// had; the redelivery and its audit entry commit together.
func (h *Handler) HandleConsoleRedeliver(c echo.Context) error {
	fl, err := h.consoleFlow(c)
	if err != nil {
		return err
	}
	ctx, org := c.Request().Context(), StaffOf(c).OrganizationID
	ev, _, err := h.webhooks.Event(ctx, org, c.Param("event"))
	if err == nil && ev.FlowID != fl.ID {
		err = webhooks.ErrNotFound
	}
	if err != nil {
		return NotFound(err, webhooks.ErrNotFound)
	}
	_, err = h.webhooks.Redeliver(ctx, org, ev.ID, "",
		Audited(h, c, identity.AuditEventRedeliver, func(r webhooks.Redelivery) (string, string) {
			return r.EventID, httpkit.RedeliveryAudit(r)
		}))
	self, label := c.Echo().Reverse("console.flow", fl.ID), string(ev.Type)+" #"+strconv.Itoa(ev.Sequence)
	if errors.Is(err, webhooks.ErrNothingToRedeliver) {
		return c.Redirect(http.StatusSeeOther, WithNotice(self, "nothing_redelivered", label))
	}
	if err != nil {
		return NotFound(err, webhooks.ErrNotFound)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice(self, "redelivered", label))
}
