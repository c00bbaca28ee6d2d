package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/views/pages"
)

// HandleConsoleResources handles "GET /console/resources": the resources
// the organization serves as a data holder and, for admins, the form that
// registers one.
func (h *Handler) HandleConsoleResources(c echo.Context) error {
	return h.renderResources(c, http.StatusOK, pages.ResourcesPage{})
}

func (h *Handler) renderResources(c echo.Context, status int, p pages.ResourcesPage) error {
	list, err := h.resources.ListResources(c.Request().Context(), StaffOf(c).OrganizationID)
	if err != nil {
		return err
	}
	p.Frame = h.Frame(c, "resources", "Resources")
	for _, r := range list {
		p.Rows = append(p.Rows, pages.ResourceRow{ID: r.ID, URI: r.URI, Name: r.Name, By: r.CreatedBy, At: Time(r.CreatedAt)})
	}
	return h.Render(c, status, pages.Resources(p))
}

// HandleConsoleCreateResource handles "POST /console/resources" (admins):
// the resource is registered and audited together, or the form comes back
// with what is wrong, nothing registered.
func (h *Handler) HandleConsoleCreateResource(c echo.Context) error {
	in := consent.NewResource{URI: c.FormValue("uri"), Name: c.FormValue("name")}.Normalize()
	again := pages.ResourcesPage{URI: in.URI, Name: in.Name}
	m := StaffOf(c)
	r, err := h.resources.CreateResource(c.Request().Context(), consent.Author{OrganizationID: m.OrganizationID, By: "staff:" + m.Username}, in,
		Audited(h, c, identity.AuditResourceCreate, func(r consent.Resource) (string, string) { return r.URI, r.Name }))
	if e, ok := apperr.As(err); ok && (e.Code == apperr.Invalid || e.Code == apperr.Conflict) {
		again.Errors = map[string]string{}
		for _, f := range e.Fields {
			again.Errors[f.Field] = "The " + f.Field + " " + f.Message + "."
		}
		if len(e.Fields) == 0 {
			again.Errors["uri"] = e.Message
		}
		return h.renderResources(c, http.StatusBadRequest, again)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/resources", "resource_created", r.URI))
}
