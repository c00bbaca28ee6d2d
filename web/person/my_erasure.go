package person

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/views/pages"
)

// This file is the person's requests to be erased, on their own page: per
// organization that holds flows of theirs, a form that asks it to erase
// them, and when they asked and when it was done.

// myErasures is the page's erasure section for the person whose consents
// are mine and who asked to be erased as asked says.
func myErasures(f pages.MyFrame, mine []consent.MyConsent, asked []erasure.PersonRequest) []pages.MyErasure {
	var out []pages.MyErasure
	index := map[string]int{}
	for _, r := range asked {
		e := pages.MyErasure{OrganizationID: r.OrganizationID, Organization: r.OrganizationName,
			Asked: fmt.Sprintf(f.T.ErasureAsked, f.Date(r.RequestedAt))}
		if r.ErasedAt != nil {
			e.Done = fmt.Sprintf(f.T.ErasureDone, f.Date(*r.ErasedAt))
		}
		index[r.OrganizationID] = len(out)
		out = append(out, e)
	}
	for _, m := range mine {
		if m.Hidden {
			continue
		}
		i, ok := index[m.OrganizationID]
		if !ok {
			i, index[m.OrganizationID] = len(out), len(out)
			out = append(out, pages.MyErasure{OrganizationID: m.OrganizationID, Organization: m.OrganizationName})
		}
		// Flows the organization still holds may be asked about once the
		// last request was done, or never made.
		if out[i].Asked == "" || out[i].Done != "" {
			out[i].CanAsk = true
			out[i].Help = fmt.Sprintf(f.T.ErasureAskHelp, m.OrganizationName)
		}
	}
	return out
}

// HandleMyErasureRequest handles "POST /my/erasure-requests": the person
// asks an organization that holds flows of theirs to erase them, with the
// consent session's CSRF token. The organization is told by
// subject.erasure_requested; the page then shows when they asked.
func (h *Handler) HandleMyErasureRequest(c echo.Context) error {
	f := h.myFrame(c)
	proof, ok, err := h.myForm(c, f)
	if !ok {
		return err
	}
	org := c.FormValue("organization")
	ref, err := h.mine.MyReferenceAt(c.Request().Context(), proof, org)
	if errors.Is(err, consent.ErrNotYours) {
		return h.myMessage(c, f, http.StatusNotFound, f.M.Title, f.M.NotYours)
	}
	if err != nil {
		return err
	}
	if _, err := h.erasures.RequestErasure(c.Request().Context(), org, proof.NationalID, ref); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/my")
}
