package console

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/views/pages"
)

// HandleConsoleErasures handles "GET /console/erasures": the
// organization's erasures with their receipts, and for admins the form
// that erases a person.
func (h *Handler) HandleConsoleErasures(c echo.Context) error {
	return h.renderErasures(c, http.StatusOK, pages.ErasuresPage{KeepReceipts: true})
}

func (h *Handler) renderErasures(c echo.Context, status int, p pages.ErasuresPage) error {
	ctx, org := c.Request().Context(), StaffOf(c).OrganizationID
	list, err := h.erasures.List(ctx, org, 0)
	if err != nil {
		return err
	}
	p.Frame = h.Frame(c, "erasures", "Erasures")
	for _, e := range list {
		row := pages.ErasureRow{ID: e.ID, Subject: e.Subject, Flows: e.FlowCount, ReceiptsKept: e.KeepReceipts, By: e.ErasedBy,
			At: Time(e.ErasedAt), ReceiptURL: "/console/erasures/" + e.ID + "/receipt"}
		if e.KeepReceipts && e.FlowCount > 0 {
			full, err := h.erasures.Get(ctx, org, e.ID)
			if err != nil {
				return err
			}
			for _, k := range full.KeptReceipts {
				row.KeptReceipts = append(row.KeptReceipts, pages.KeptReceiptLink{ID: k.ID,
					URL: "/console/erasures/" + e.ID + "/kept/" + k.ID})
			}
		}
		p.Rows = append(p.Rows, row)
	}
	return h.Render(c, status, pages.Erasures(p))
}

// erasureForm reads the erasure form and checks it, the national id as
// the API checks it.
func (h *Handler) erasureForm(c echo.Context) (erasure.Request, map[string]string) {
	in := erasure.Request{NationalID: c.FormValue("nationalId"), KeepReceipts: c.FormValue("keepReceipts") == "true"}
	if err := in.Validate(h.cfg.NationalIDs(nil)); err != nil {
		if e, ok := apperr.As(err); ok && len(e.Fields) > 0 {
			return in, map[string]string{"nationalId": "The national id " + e.Fields[0].Message + "."}
		}
		return in, map[string]string{"nationalId": "The national id is not valid."}
	}
	return in, nil
}

// HandleConsoleEraseConfirm handles "POST /console/erasures/confirm"
// (admins): the confirmation step, or the form again with what is wrong.
func (h *Handler) HandleConsoleEraseConfirm(c echo.Context) error {
	in, problems := h.erasureForm(c)
	if problems != nil {
		return h.renderErasures(c, http.StatusBadRequest, pages.ErasuresPage{KeepReceipts: in.KeepReceipts, Errors: problems})
	}
	return h.Render(c, http.StatusOK, pages.ErasureConfirm(pages.ErasureConfirmPage{Frame: h.Frame(c, "erasures", "Erase a person"),
		NationalID: in.NationalID, Masked: consent.MaskNationalID(in.NationalID), KeepReceipts: in.KeepReceipts}))
}

// HandleConsoleErase handles "POST /console/erasures" (admins): the person
// is erased, and the erasure and its audit entry commit together.
func (h *Handler) HandleConsoleErase(c echo.Context) error {
	in, problems := h.erasureForm(c)
	if problems != nil {
		return h.renderErasures(c, http.StatusBadRequest, pages.ErasuresPage{KeepReceipts: in.KeepReceipts, Errors: problems})
	}
	m := StaffOf(c)
	e, err := h.erasures.Erase(c.Request().Context(), m.OrganizationID, "staff:"+m.Username, in,
		Audited(h, c, identity.AuditSubjectErase, func(e erasure.Erasure) (string, string) {
			if e.Replayed {
				return e.ID, "asked again: nothing left to erase"
			}
			return e.ID, strconv.Itoa(e.FlowCount) + " flows erased"
		}))
	if err != nil {
		return err
	}
	key := "erased"
	if e.Replayed {
		key = "erased_before"
	}
	return c.Redirect(http.StatusSeeOther, WithNotice("/console/erasures", key, strconv.Itoa(e.FlowCount)))
}

// HandleConsoleErasureReceipt handles "GET /console/erasures/:id/receipt":
// the erasure receipt, to download.
func (h *Handler) HandleConsoleErasureReceipt(c echo.Context) error {
	e, err := h.erasures.Get(c.Request().Context(), StaffOf(c).OrganizationID, c.Param("id"))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="erasure-receipt-`+e.ID+`.jwt"`)
	return c.Blob(http.StatusOK, "application/jwt", []byte(e.Receipt))
}

// HandleConsoleKeptReceipt handles
// "GET /console/erasures/:id/kept/:receiptId": a consent receipt the
// erasure kept, to download.
func (h *Handler) HandleConsoleKeptReceipt(c echo.Context) error {
	e, err := h.erasures.Get(c.Request().Context(), StaffOf(c).OrganizationID, c.Param("id"))
	if err != nil {
		return err
	}
	for _, k := range e.KeptReceipts {
		if k.ID == c.Param("receiptId") {
			c.Response().Header().Set("Content-Disposition", `attachment; filename="consent-receipt-`+k.ID+`.jwt"`)
			return c.Blob(http.StatusOK, "application/jwt", []byte(k.JWS))
		}
	}
	return ErrNotFound
}
