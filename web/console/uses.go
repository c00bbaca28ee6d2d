package console

import (
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/views/pages"
)

// usesShown is how many uses the flow page lists at a time.
const usesShown = 20

// flowUses is the page of flow f's uses that the flow page at self lists:
// the latest, or those older than the use its uses_after parameter names.
func (h *Handler) flowUses(c echo.Context, f flows.Flow, self string) (pages.FlowUses, error) {
	after := c.QueryParam("uses_after")
	page, err := h.flows.Uses(c.Request().Context(), consoleCaller(c), f.ID, flows.UseParams{Limit: usesShown, StartingAfter: after})
	if err != nil {
		return pages.FlowUses{}, err
	}
	return flowUsesOf(page, self, after != ""), nil
}

// flowUsesOf is the view of a page of uses on the flow page at self; older
// says whether it is a page after the first.
func flowUsesOf(page flows.UsePage, self string, older bool) pages.FlowUses {
	var out pages.FlowUses
	for _, u := range page.Uses {
		out.Rows = append(out.Rows, pages.UseRow{UsedAt: Time(u.UsedAt), Action: u.Action,
			DataCategories: OrDash(strings.Join(u.DataCategories, ", ")), Reference: OrDash(u.Reference), RecordedBy: u.RecordedBy})
		if u.Action == flows.ActionConsentToken {
			out.Tokens = append(out.Tokens, pages.TokenRow{IssuedAt: Time(u.UsedAt), Resource: OrDash(u.Resource), Client: u.RecordedBy})
		}
	}
	if page.HasMore && len(page.Uses) > 0 {
		out.OlderURL = self + "?uses_after=" + url.QueryEscape(page.Uses[len(page.Uses)-1].ID) + "#uses"
	}
	if older {
		out.LatestURL = self + "#uses"
	}
	return out
}
