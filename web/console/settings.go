package console

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// settingsFields maps the identity module's field names to the form's.
var settingsFields = map[string]string{"referencePrefix": "reference_prefix", "organizationNumber": "organization_number",
	"redirectOrigins": "redirect_origins"}

// HandleConsoleSettings handles "GET /console/settings": a form for admins,
// read-only for viewers.
func (h *Handler) HandleConsoleSettings(c echo.Context) error {
	org, err := h.orgs.Organization(c.Request().Context(), StaffOf(c).OrganizationID)
	if err != nil {
		return NotFound(err, orgs.ErrOrganizationNotFound)
	}
	return h.Render(c, http.StatusOK, pages.Settings(pages.SettingsPage{Frame: h.Frame(c, "settings", "Settings"),
		OrganizationID: org.ID, Name: org.Name, ReferencePrefix: org.ReferencePrefix, OrganizationNumber: org.OrganizationNumber,
		RedirectOrigins: strings.Join(org.RedirectOrigins, "\n")}))
}

// HandleConsoleSaveSettings handles "POST /console/settings" (admins).
func (h *Handler) HandleConsoleSaveSettings(c echo.Context) error {
	ctx := c.Request().Context()
	org, err := h.orgs.Organization(ctx, StaffOf(c).OrganizationID)
	if err != nil {
		return NotFound(err, orgs.ErrOrganizationNotFound)
	}
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	u := orgs.OrganizationUpdate{ID: org.ID, ReferencePrefix: f.Text("reference_prefix", 8),
		OrganizationNumber: f.Text("organization_number", 64), RedirectOrigins: f.Lines("redirect_origins", orgs.MaxRedirectOrigins)}
	rerender := func() error {
		return h.Render(c, http.StatusBadRequest, pages.Settings(pages.SettingsPage{Frame: h.Frame(c, "settings", "Settings"),
			OrganizationID: org.ID, Name: org.Name, ReferencePrefix: f.Value("reference_prefix"),
			OrganizationNumber: f.Value("organization_number"), RedirectOrigins: f.Value("redirect_origins"), Errors: f.Errors}))
	}
	if !f.Valid() {
		return rerender()
	}
	_, err = h.orgs.UpdateOrganization(ctx, u,
		Audited(h, c, identity.AuditSettingsUpdate, func(ch orgs.OrganizationChange) (string, string) {
			return "settings", settingsChange(ch.Before, ch.After)
		}))
	if f.Refused(err, settingsFields) {
		return rerender()
	}
	if err != nil {
		return NotFound(err, orgs.ErrOrganizationNotFound)
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/settings", "saved", ""))
}

// settingsChange says what changed, for the audit log.
func settingsChange(before, after orgs.Organization) string {
	var parts []string
	if before.ReferencePrefix != after.ReferencePrefix {
		parts = append(parts, "reference prefix "+before.ReferencePrefix+" → "+after.ReferencePrefix)
	}
	if before.OrganizationNumber != after.OrganizationNumber {
		parts = append(parts, "organization number "+OrDash(before.OrganizationNumber)+" → "+OrDash(after.OrganizationNumber))
	}
	if !slices.Equal(before.RedirectOrigins, after.RedirectOrigins) {
		parts = append(parts, "redirect origins: "+strconv.Itoa(len(after.RedirectOrigins))+" listed")
	}
	if len(parts) == 0 {
		return "no change"
	}
	out := strings.Join(parts, "; ")
	if len(out) > 500 {
		out = out[:497] + "…"
	}
	return out
}

// HandleConsoleAudit handles "GET /console/audit" (admins): who did what.
func (h *Handler) HandleConsoleAudit(c echo.Context) error {
	var before int64
	if b := c.QueryParam("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			return apperr.New(apperr.Invalid, "This page address is not valid. Start again from the audit log.")
		}
		before = n
	}
	entries, more, err := h.audit.AuditLog(c.Request().Context(), StaffOf(c).OrganizationID, 50, before)
	if err != nil {
		return err
	}
	rows := make([]pages.AuditRow, len(entries))
	for i, e := range entries {
		rows[i] = pages.AuditRow{At: e.At.UTC().Format("2006-01-02 15:04:05 UTC"), Actor: e.Actor, Action: e.Action, Target: e.Target, Detail: e.Detail}
	}
	var pager pages.Pager
	if before != 0 {
		pager.PrevURL, pager.PrevLabel = "/console/audit", "← Newest"
	}
	if more && len(entries) > 0 {
		pager.NextURL, pager.NextLabel = "/console/audit?before="+strconv.FormatInt(entries[len(entries)-1].ID, 10), "Older →"
	}
	return h.Render(c, http.StatusOK, pages.Audit(pages.AuditPage{Frame: h.Frame(c, "audit", "Audit log"), Rows: rows, Pager: pager}))
}
