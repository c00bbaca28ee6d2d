package access

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/console"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// rateLimitLabel says what limit a client is held to, for the credentials
// page: its own, or the deployment's default (perMinute per minute; 0 none).
func rateLimitLabel(r identity.RateLimit, defaultPerMinute int) string {
	if !r.Own {
		return perMinuteLabel(defaultPerMinute) + " (default)"
	}
	return perMinuteLabel(r.PerMinute)
}

func perMinuteLabel(perMinute int) string {
	if perMinute == 0 {
		return "no limit"
	}
	return strconv.Itoa(perMinute) + " per minute"
}

// HandleConsoleClientRateLimit handles
// "GET /console/credentials/clients/:id/rate-limit" (admins).
func (h *Handler) HandleConsoleClientRateLimit(c echo.Context) error {
	cl, err := h.consoleClient(c)
	if err != nil {
		return err
	}
	if cl.Revoked() {
		return c.Redirect(http.StatusSeeOther, "/console/credentials")
	}
	p := pages.ClientRateLimitPage{Choice: "default"}
	switch r := cl.RateLimit; {
	case r.Own && r.PerMinute == 0:
		p.Choice = "none"
	case r.Own:
		p.Choice, p.PerMinute = "own", strconv.Itoa(r.PerMinute)
	}
	return h.renderClientRateLimit(c, http.StatusOK, cl, p)
}

func (h *Handler) renderClientRateLimit(c echo.Context, status int, cl orgs.Client, p pages.ClientRateLimitPage) error {
	p.Frame, p.ClientID, p.Name = h.console.Frame(c, "credentials", "Client rate limit"), cl.ID, cl.Name
	p.Default = perMinuteLabel(h.cfg.APIRateLimit)
	return h.console.Render(c, status, pages.ClientRateLimit(p))
}

// HandleConsoleSaveClientRateLimit handles
// "POST /console/credentials/clients/:id/rate-limit" (admins): limit=default
// returns the client to the deployment's default, limit=own sets its own
// (per_minute, at least 1) and limit=none lifts its limit. A change is
// audited; saving the limit the client has records nothing.
func (h *Handler) HandleConsoleSaveClientRateLimit(c echo.Context) error {
	cl, err := h.consoleClient(c)
	if err != nil {
		return err
	}
	f, err := httpkit.BindForm(c)
	if err != nil {
		return err
	}
	again := pages.ClientRateLimitPage{Choice: f.Text("limit", 10), PerMinute: f.Text("per_minute", 20), Errors: f.Errors}
	var limit identity.RateLimit
	switch again.Choice {
	case "default":
	case "none":
		limit = identity.RateLimit{Own: true}
	case "own":
		n, err := strconv.Atoi(again.PerMinute)
		if err != nil || n < 1 || n > identity.MaxRateLimit {
			f.Fail("per_minute", "Give a whole number of requests from 1 to %d.", identity.MaxRateLimit)
		}
		limit = identity.RateLimit{Own: true, PerMinute: n}
	default:
		f.Fail("limit", "Choose the default, its own limit or no limit.")
	}
	if !f.Valid() {
		return h.renderClientRateLimit(c, http.StatusBadRequest, cl, again)
	}
	saved, err := h.clients.SetClientRateLimit(c.Request().Context(), console.StaffOf(c).OrganizationID, cl.ID, limit,
		console.Audited(h.console, c, identity.AuditClientRateLimit, func(ch orgs.ClientChange) (string, string) {
			return ch.After.ID, orgs.RateLimitAuditDetail(ch.After.Name, ch.After.RateLimit)
		}))
	if f.Refused(err, map[string]string{"perMinute": "per_minute"}) {
		return h.renderClientRateLimit(c, http.StatusBadRequest, cl, again)
	}
	if err != nil {
		return console.NotFound(err, orgs.ErrClientNotFound)
	}
	return c.Redirect(http.StatusSeeOther, console.WithNotice("/console/credentials", "rate_limit", saved.Name))
}
