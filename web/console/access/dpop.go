package access

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/web/console"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// HandleConsoleClientDPoP handles "POST /console/credentials/clients/:id/dpop"
// (admins): dpop=on requires the client to use DPoP (RFC 9449), dpop=off
// stops requiring it. Tokens it holds are unchanged. A change is audited;
// asking for the setting the client already has records nothing.
func (h *Handler) HandleConsoleClientDPoP(c echo.Context) error {
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	var on bool
	switch f.Text("dpop", 3) {
	case "on":
		on = true
	case "off":
	default:
		return apperr.New(apperr.Invalid, "Choose on or off.")
	}
	cl, err := h.clients.SetClientDPoP(c.Request().Context(), console.StaffOf(c).OrganizationID, c.Param("id"), on,
		console.Audited(h.console, c, identity.AuditClientDPoP, func(ch orgs.ClientChange) (string, string) {
			return ch.After.ID, orgs.DPoPAuditDetail(ch.After)
		}))
	if err != nil {
		return console.NotFound(err, orgs.ErrClientNotFound)
	}
	notice := "dpop_off"
	if cl.DPoPBound {
		notice = "dpop_on"
	}
	return c.Redirect(http.StatusSeeOther, console.WithNotice("/console/credentials", notice, cl.Name))
}
