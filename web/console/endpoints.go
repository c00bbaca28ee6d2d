package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/layouts"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// endpointFormField maps a webhooks module field name to the form's.
func endpointFormField(field string) string {
	switch {
	case strings.HasPrefix(field, "eventTypes"):
		return "event_types"
	case field == "rateLimit":
		return "rate_limit"
	}
	return field
}

// endpointHost is how a notice names an endpoint: its host.
func endpointHost(e webhooks.Endpoint) string {
	if u, err := url.Parse(e.URL); err == nil && u.Host != "" {
		return httpkit.TruncateRunes(u.Host, 80)
	}
	return "endpoint"
}

// bannerNames is how many disabled endpoints the banner names; it counts
// the rest.
const bannerNames = 3

// endpointBanner is the warning every console page of the organization
// shows while flowd has disabled one of its endpoints, in the staff
// member's language; nil when there is none. It costs each page one query;
// a failed one is logged and shows no banner rather than no page.
func (h *Handler) endpointBanner(c echo.Context, organizationID string) *layouts.Banner {
	disabled, err := h.endpoints.Disabled(c.Request().Context(), organizationID)
	if err != nil {
		h.log.WarnContext(c.Request().Context(), "console: reading the disabled webhook endpoints", "error", err.Error())
		return nil
	}
	if len(disabled) == 0 {
		return nil
	}
	lang := i18n.Negotiate("", c.Request().Header.Get("Accept-Language"))
	t := i18n.EndpointBannerTexts(lang)
	names := make([]string, 0, bannerNames+1)
	for i, e := range disabled {
		if i == bannerNames {
			names = append(names, fmt.Sprintf(t.More, len(disabled)-bannerNames))
			break
		}
		names = append(names, endpointName(e))
	}
	text := fmt.Sprintf(t.One, names[0])
	if len(disabled) > 1 {
		text = fmt.Sprintf(t.Many, strings.Join(names, ", "))
	}
	return &layouts.Banner{Lang: lang.String(), Text: text, LinkText: t.Link, Href: "/console/webhooks"}
}

// endpointName is how the banner names an endpoint: its description, else its host.
func endpointName(e webhooks.Endpoint) string {
	if e.Description != "" {
		return httpkit.TruncateRunes(e.Description, 80)
	}
	return endpointHost(e)
}

// HandleConsoleEndpoints handles "GET /console/webhooks": the
// organization's webhook endpoints, in the order they were added, and the
// recoveries of the flows' own webhook URLs; the recovery form proposes the
// last 24 hours.
func (h *Handler) HandleConsoleEndpoints(c echo.Context) error {
	return h.renderEndpoints(c, http.StatusOK, dayAgo(), "", nil)
}

// renderEndpoints renders the webhooks page with status, the recovery form
// of the flows' own URLs holding since and host, and errs.
func (h *Handler) renderEndpoints(c echo.Context, status int, since, host string, errs map[string]string) error {
	ctx, org := c.Request().Context(), StaffOf(c).OrganizationID
	list, err := h.endpoints.List(ctx, org, webhooks.OldestFirst)
	if err != nil {
		return err
	}
	recoveries, err := h.webhooks.FlowURLRecoveries(ctx, org)
	if err != nil {
		return err
	}
	p := pages.EndpointsPage{Frame: h.Frame(c, "webhooks", "Webhook endpoints"), Full: len(list) >= webhooks.MaxEndpoints,
		Max: webhooks.MaxEndpoints, Since: since, Host: host, Errors: errs}
	for _, e := range list {
		p.Rows = append(p.Rows, pages.EndpointRow{ID: e.ID, URL: e.URL, Description: e.Description, Events: endpointEvents(e),
			Enabled: e.Enabled, DisabledReason: e.DisabledReason, FailingSince: TimePtr(e.FailingSince, ""), Created: Time(e.CreatedAt),
			Signing: string(e.Signing), Payload: string(e.Payload)})
	}
	if p.Signing, err = h.webhookSigning(c, org); err != nil {
		return err
	}
	var active bool
	if p.Recoveries, active = recoveryRows(recoveries); active {
		p.Frame.Refresh = recoveryRefresh
	}
	return h.Render(c, status, pages.Endpoints(p))
}

// endpointForm is the view model of the endpoint form for e, the types
// ticked being e's.
func (h *Handler) endpointForm(c echo.Context, heading, action, submit string, e webhooks.Endpoint, errs map[string]string) pages.EndpointFormPage {
	p := pages.EndpointFormPage{Frame: h.Frame(c, "webhooks", heading), Heading: heading, Action: action, Submit: submit,
		URL: e.URL, Description: e.Description, Enabled: e.Enabled, Signing: string(e.Signing), Payload: string(e.Payload),
		PerFlow: e.Ordering == webhooks.PerFlow, Errors: errs}
	if e.RateLimit != 0 {
		p.RateLimit = strconv.Itoa(e.RateLimit)
	}
	for _, t := range webhooks.EventTypes {
		p.Events = append(p.Events, pages.EventChoice{Value: string(t), Checked: slices.Contains(e.EventTypes, t)})
	}
	return p
}

// HandleConsoleNewEndpoint handles "GET /console/webhooks/new" (admins).
func (h *Handler) HandleConsoleNewEndpoint(c echo.Context) error {
	return h.Render(c, http.StatusOK, pages.EndpointForm(h.endpointForm(c, "Add a webhook endpoint", "/console/webhooks",
		"Add endpoint", webhooks.Endpoint{Enabled: true}, nil)))
}

// bindEndpointForm reads the endpoint form; the module checks its values.
func bindEndpointForm(c echo.Context) (*httpkit.Form, webhooks.Endpoint, error) {
	f, err := httpkit.BindForm(c)
	if err != nil {
		return nil, webhooks.Endpoint{}, err
	}
	e := webhooks.Endpoint{URL: strings.TrimSpace(f.Value("url")), Description: strings.TrimSpace(f.Value("description")),
		EventTypes: []webhooks.EventType{}, Enabled: f.Bool("enabled"),
		Signing: webhooks.Signing(f.Value("signing")), Payload: webhooks.Payload(f.Value("payload")), Ordering: webhooks.Unordered}
	for _, t := range f.All("event_types") {
		e.EventTypes = append(e.EventTypes, webhooks.EventType(t))
	}
	if o := f.Value("ordering"); o != "" {
		e.Ordering = webhooks.Ordering(o)
	}
	if r := strings.TrimSpace(f.Value("rate_limit")); r != "" {
		n, err := strconv.Atoi(r)
		if err != nil || n == 0 {
			n = -1 // out of range: the module names the field
		}
		e.RateLimit = n
	}
	return f, e, nil
}

// sent is a form's choice as an update takes it: nil, keeping the
// endpoint's, when the form did not send it.
func sent[T ~string](v T) *T {
	if v == "" {
		return nil
	}
	return &v
}

// refusedEndpoint notes the module's field errors on the form, or the
// message of a conflict (the organization's limit) above it; ok reports
// whether err was one of those.
func refusedEndpoint(f *httpkit.Form, err error) (status int, ok bool) {
	if e, isApp := apperr.As(err); isApp && e.Code == apperr.Conflict {
		f.Fail("form", "%s", e.Message)
		return http.StatusConflict, true
	}
	if e, isApp := apperr.As(err); isApp && e.Code == apperr.Invalid {
		for _, fe := range e.Fields {
			f.Fail(endpointFormField(fe.Field), "%s", httpkit.Sentence(fe.Message))
		}
		return http.StatusBadRequest, true
	}
	return 0, false
}

// HandleConsoleCreateEndpoint handles "POST /console/webhooks" (admins).
func (h *Handler) HandleConsoleCreateEndpoint(c echo.Context) error {
	f, e, err := bindEndpointForm(c)
	if err != nil {
		return err
	}
	created, err := h.endpoints.Create(c.Request().Context(), StaffOf(c).OrganizationID,
		webhooks.NewEndpoint{URL: e.URL, Description: e.Description, EventTypes: e.EventTypes, Enabled: e.Enabled,
			Signing: e.Signing, Payload: e.Payload, Ordering: e.Ordering, RateLimit: e.RateLimit},
		Audited(h, c, identity.AuditWebhookEndpointCreate, func(e webhooks.Endpoint) (string, string) { return e.ID, httpkit.EndpointAudit(e) }))
	if status, ok := refusedEndpoint(f, err); ok {
		return h.Render(c, status, pages.EndpointForm(h.endpointForm(c, "Add a webhook endpoint", "/console/webhooks",
			"Add endpoint", e, f.Errors)))
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/webhooks", "endpoint_added", endpointHost(created)))
}

// consoleEndpoint finds one of the organization's endpoints by the path's id.
func (h *Handler) consoleEndpoint(c echo.Context) (webhooks.Endpoint, error) {
	e, err := h.endpoints.Get(c.Request().Context(), StaffOf(c).OrganizationID, c.Param("id"))
	return e, NotFound(err, webhooks.ErrEndpointNotFound)
}

func endpointEditPath(id string) string { return "/console/webhooks/" + id }

// HandleConsoleEditEndpoint handles "GET /console/webhooks/:id/edit" (admins).
func (h *Handler) HandleConsoleEditEndpoint(c echo.Context) error {
	e, err := h.consoleEndpoint(c)
	if err != nil {
		return err
	}
	return h.Render(c, http.StatusOK, pages.EndpointForm(h.endpointForm(c, "Edit webhook endpoint", endpointEditPath(e.ID),
		"Save endpoint", e, nil)))
}

// HandleConsoleSaveEndpoint handles "POST /console/webhooks/:id" (admins):
// the form replaces every field of the endpoint.
func (h *Handler) HandleConsoleSaveEndpoint(c echo.Context) error {
	f, e, err := bindEndpointForm(c)
	if err != nil {
		return err
	}
	saved, err := h.endpoints.Update(c.Request().Context(), StaffOf(c).OrganizationID, c.Param("id"),
		webhooks.EndpointUpdate{URL: &e.URL, Description: &e.Description, EventTypes: &e.EventTypes, Enabled: &e.Enabled,
			Signing: sent(e.Signing), Payload: sent(e.Payload), Ordering: &e.Ordering, RateLimit: &e.RateLimit}, etag.Any,
		Audited(h, c, identity.AuditWebhookEndpointUpdate, func(ch webhooks.EndpointChange) (string, string) {
			return ch.After.ID, ch.Describe() + ": " + httpkit.EndpointAudit(ch.After)
		}))
	if status, ok := refusedEndpoint(f, err); ok {
		return h.Render(c, status, pages.EndpointForm(h.endpointForm(c, "Edit webhook endpoint", endpointEditPath(c.Param("id")),
			"Save endpoint", e, f.Errors)))
	}
	if err != nil {
		return NotFound(err, webhooks.ErrEndpointNotFound)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/webhooks", "endpoint_saved", endpointHost(saved)))
}

// HandleConsoleEnableEndpointConfirm handles "GET /console/webhooks/:id/enable"
// (admins): the confirmation of enabling a disabled endpoint, which offers
// to recover what it missed since MissedSince.
func (h *Handler) HandleConsoleEnableEndpointConfirm(c echo.Context) error {
	e, err := h.consoleEndpoint(c)
	if err != nil {
		return err
	}
	if e.Enabled {
		return c.Redirect(http.StatusSeeOther, "/console/webhooks")
	}
	return h.renderEnable(c, http.StatusOK, e, "", true, nil)
}

// renderEnable renders the confirmation of enabling e with status, the
// recovery ticked when recover, its time since (MissedSince's when empty)
// and errs.
func (h *Handler) renderEnable(c echo.Context, status int, e webhooks.Endpoint, since string, recover bool, errs map[string]string) error {
	missed, clamped := h.webhooks.MissedSince(e, time.Now())
	note := "When it was disabled."
	switch {
	case clamped:
		// The oldest time kept moves on while the form is open.
		missed = missed.Add(10 * time.Minute).Truncate(time.Minute)
		note = "About the oldest time flowd keeps events from: what it missed before is gone."
	case e.FailingSince != nil:
		note = "A whole retry schedule before its deliveries began to fail (" + Time(*e.FailingSince) +
			"), so that the events already under way then are covered too."
	}
	if since == "" {
		since = missed.UTC().Format(sinceLayout)
	}
	details := []pages.KV{{Label: "URL", Value: e.URL, Code: true}}
	if e.Description != "" {
		details = append(details, pages.KV{Label: "Description", Value: e.Description})
	}
	if e.DisabledAt != nil {
		details = append(details, pages.KV{Label: "Disabled", Value: Time(*e.DisabledAt)})
	}
	if e.DisabledReason != "" {
		details = append(details, pages.KV{Label: "Disabled because", Value: e.DisabledReason})
	}
	return h.Render(c, status, pages.EndpointEnable(pages.EndpointEnablePage{Frame: h.Frame(c, "webhooks", "Enable endpoint"),
		ID: e.ID, Details: details, Recover: recover, Since: since, SinceNote: note, Errors: errs}))
}

// HandleConsoleEnableEndpoint handles "POST /console/webhooks/:id/enable"
// and "POST /console/webhooks/:id/disable" (admins). With recover ticked,
// enabling then recovers what the endpoint missed since the form's time,
// whose progress its page shows; a time that cannot be read enables
// nothing.
func (h *Handler) HandleConsoleEnableEndpoint(c echo.Context) error {
	enable := strings.HasSuffix(c.Path(), "/enable")
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	recoverToo := enable && f.Bool("recover")
	raw := strings.TrimSpace(f.Value("since"))
	since, ok := parseSince(raw)
	if recoverToo && !ok {
		e, err := h.consoleEndpoint(c)
		if err != nil {
			return err
		}
		f.Fail("since", "Give a date and time, such as 2026-01-02T03:04.")
		return h.renderEnable(c, http.StatusBadRequest, e, raw, true, f.Errors)
	}
	ctx, m := c.Request().Context(), StaffOf(c)
	e, err := h.endpoints.Update(ctx, m.OrganizationID, c.Param("id"),
		webhooks.EndpointUpdate{Enabled: &enable}, etag.Any,
		Audited(h, c, identity.AuditWebhookEndpointUpdate, func(ch webhooks.EndpointChange) (string, string) {
			return ch.After.ID, ch.Describe() + ": " + httpkit.EndpointAudit(ch.After)
		}))
	if err != nil {
		return NotFound(err, webhooks.ErrEndpointNotFound)
	}
	if !recoverToo {
		notice := "endpoint_disabled"
		if enable {
			notice = "endpoint_enabled"
		}
		return c.Redirect(http.StatusSeeOther, WithNotice("/console/webhooks", notice, endpointHost(e)))
	}
	_, err = h.webhooks.Recover(ctx, m.OrganizationID, e.ID, since, StaffActor(m), h.auditedRecovery(c))
	if err != nil {
		f.Fail("form", "Webhook endpoint %s was enabled, but the recovery of what it missed was not started.", endpointHost(e))
		return h.recoveryRefused(c, f, e, raw, err)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice(c.Echo().Reverse("console.webhook", e.ID), "endpoint_enabled_recovering", endpointHost(e)))
}

// HandleConsoleDeleteEndpointConfirm handles "GET /console/webhooks/:id/delete" (admins).
func (h *Handler) HandleConsoleDeleteEndpointConfirm(c echo.Context) error {
	e, err := h.consoleEndpoint(c)
	if err != nil {
		return err
	}
	return h.Render(c, http.StatusOK, pages.Confirm(pages.ConfirmPage{Frame: h.Frame(c, "webhooks", "Delete endpoint"),
		Heading: "Delete this webhook endpoint?", Message: "It receives no more events. Deliveries already under way may still arrive. This cannot be undone.",
		Details: []pages.KV{{Label: "URL", Value: e.URL, Code: true}, {Label: "Description", Value: e.Description}},
		Action:  "/console/webhooks/" + e.ID + "/delete", Button: "Delete endpoint", Danger: true, BackURL: "/console/webhooks"}))
}

// HandleConsoleDeleteEndpoint handles "POST /console/webhooks/:id/delete" (admins).
func (h *Handler) HandleConsoleDeleteEndpoint(c echo.Context) error {
	e, err := h.endpoints.Delete(c.Request().Context(), StaffOf(c).OrganizationID, c.Param("id"), etag.Any,
		Audited(h, c, identity.AuditWebhookEndpointDelete, func(e webhooks.Endpoint) (string, string) { return e.ID, httpkit.EndpointAudit(e) }))
	if err != nil {
		return NotFound(err, webhooks.ErrEndpointNotFound)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/webhooks", "endpoint_deleted", endpointHost(e)))
}
