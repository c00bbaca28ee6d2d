package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// erasureRequest is the body of POST /api/erasures.
type erasureRequest struct {
	NationalID   string `json:"nationalId"`
	KeepReceipts bool   `json:"keepReceipts"`
}

// erasureJSON is an erasure as the API shows it, the OpenAPI document's
// Erasure. It names the person only by their receipt subject.
type erasureJSON struct {
	ID             string            `json:"id"`
	Subject        string            `json:"subject"`
	FlowCount      int               `json:"flowCount"`
	KeepReceipts   bool              `json:"keepReceipts"`
	KeyDestroyedAt *apiInstant       `json:"keyDestroyedAt"`
	ErasedBy       string            `json:"erasedBy"`
	ErasedAt       apiInstant        `json:"erasedAt"`
	Receipt        string            `json:"receipt"`
	KeptReceipts   []keptReceiptJSON `json:"keptReceipts"`
}

type keptReceiptJSON struct {
	ID      string `json:"id"`
	FlowID  string `json:"flowId"`
	Receipt string `json:"receipt"`
}

func toErasureJSON(e erasure.Erasure) erasureJSON {
	out := erasureJSON{ID: e.ID, Subject: e.Subject, FlowCount: e.FlowCount, KeepReceipts: e.KeepReceipts,
		KeyDestroyedAt: (*apiInstant)(e.KeyDestroyedAt), ErasedBy: e.ErasedBy, ErasedAt: apiInstant(e.ErasedAt), Receipt: e.Receipt,
		KeptReceipts: make([]keptReceiptJSON, len(e.KeptReceipts))}
	for i, k := range e.KeptReceipts {
		out.KeptReceipts[i] = keptReceiptJSON{ID: k.ID, FlowID: k.FlowID, Receipt: k.JWS}
	}
	return out
}

// erasurePath is where an erasure is read.
func erasurePath(id string) string { return "/api/erasures/" + id }

// HandleErasureCreate handles "POST /api/erasures": the organization
// erases a person, named by nationalId, and gets the erasure with its
// signed receipt: 201 for a new erasure, 200 with the latest one when the
// person was erased before and nothing of them is left.
func (h *Handler) HandleErasureCreate(c echo.Context) error {
	var req erasureRequest
	in := func() erasure.Request {
		return erasure.Request{NationalID: req.NationalID, KeepReceipts: req.KeepReceipts}
	}
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return httpkit.WithFieldErrors(err, in().Validate(h.cfg.NationalIDs(nil)))
	}
	p := httpkit.Principal(c)
	answer := func(e erasure.Erasure) reply {
		status := http.StatusCreated
		if e.Replayed {
			status = http.StatusOK
		}
		body := toErasureJSON(e)
		return reply{status: status, header: http.Header{echo.HeaderLocation: {erasurePath(e.ID)}, "Etag": {bodyTag(body)}}, body: body}
	}
	e, err := h.erasures.Erase(c.Request().Context(), p.OrganizationID, "client:"+p.ClientID, in(),
		apiAudited(h, c, identity.AuditSubjectErase, func(e erasure.Erasure) (string, string) {
			return e.ID, erasureAudit(e)
		}), keepReply(c, answer))
	if err != nil {
		return err
	}
	return h.writeReply(c, answer(e))
}

// erasureAudit is an erasure's audit detail: nothing personal.
func erasureAudit(e erasure.Erasure) string {
	if e.Replayed {
		return "asked again: nothing left to erase"
	}
	detail := strconv.Itoa(e.FlowCount) + " flows erased"
	if e.KeepReceipts {
		detail += ", consent receipts kept"
	}
	return detail
}

// HandleErasureList handles "GET /api/erasures": the organization's
// latest erasures, newest first.
func (h *Handler) HandleErasureList(c echo.Context) error {
	list, err := h.erasures.List(c.Request().Context(), httpkit.Principal(c).OrganizationID, 0)
	if err != nil {
		return err
	}
	out := struct {
		Data []erasureJSON `json:"data"`
	}{Data: make([]erasureJSON, len(list))}
	for i, e := range list {
		out.Data[i] = toErasureJSON(e)
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// HandleErasureGet handles "GET /api/erasures/:id": one erasure with the
// consent receipts it kept.
func (h *Handler) HandleErasureGet(c echo.Context) error {
	e, err := h.erasures.Get(c.Request().Context(), httpkit.Principal(c).OrganizationID, c.Param("id"))
	if err != nil {
		return err
	}
	return h.writeUnversioned(c, http.StatusOK, toErasureJSON(e))
}
