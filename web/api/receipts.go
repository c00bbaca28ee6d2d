package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// attachmentJSON is a flow's attachment as lists show it.
type attachmentJSON struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`
	CreatedAt apiInstant `json:"createdAt"`
	Href      string     `json:"href"`
}

type attachmentList struct {
	HasMore bool             `json:"has_more"`
	Data    []attachmentJSON `json:"data"`
}

// HandleAttachmentList handles "GET /api/flows/:id/attachments": the flow's
// consent receipts, oldest first. A flow has a few at most, so one page
// holds them all.
func (h *Handler) HandleAttachmentList(c echo.Context) error {
	list, err := h.flows.Attachments(c.Request().Context(), callerOf(c), c.Param("id"))
	if err != nil {
		return flowError(err)
	}
	out := attachmentList{Data: make([]attachmentJSON, len(list))}
	for i, a := range list {
		out.Data[i] = attachmentJSON{ID: a.ID, Kind: a.Kind, CreatedAt: apiInstant(a.CreatedAt),
			Href: flowPath(a.FlowID) + "/attachments/" + a.ID}
	}
	return httpkit.WriteJSON(c, http.StatusOK, out)
}

// HandleAttachmentGet handles "GET /api/flows/:id/attachments/:attachmentId":
// the attachment itself, a receipt's compact JWS as application/jwt.
func (h *Handler) HandleAttachmentGet(c echo.Context) error {
	a, err := h.flows.Attachment(c.Request().Context(), callerOf(c), c.Param("id"), c.Param("attachmentId"))
	if errors.Is(err, flows.ErrNotFound) {
		return apperr.New(apperr.NotFound, "No attachment with this id on this flow.")
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Content-Disposition", `attachment; filename="consent-receipt-`+a.ID+`.jwt"`)
	return writeTagged(c, http.StatusOK, a.ContentType, []byte(a.Body))
}

// verifyReceiptRequest is the body of POST /api/receipts/verify.
type verifyReceiptRequest struct {
	Receipt string `json:"receipt"`
}

// HandleReceiptVerify handles "POST /api/receipts/verify", public: anyone
// holding a receipt may ask whether flowd signed it. A receipt that does not
// verify is an answer, not an error: 200 with valid false and the reason.
func (h *Handler) HandleReceiptVerify(c echo.Context) error {
	var req verifyReceiptRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Receipt) == "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "receipt", Message: "is required: the receipt's compact JWS"}})
	}
	return httpkit.WriteJSON(c, http.StatusOK, httpkit.VerifyReceipt(c, h.receipts, h.erasures, h.log, req.Receipt))
}

// subjectCheckRequest is the body of POST /api/receipts/subject.
type subjectCheckRequest struct {
	Receipt    string `json:"receipt"`
	NationalID string `json:"nationalId"`
}

type subjectCheck struct {
	Matches bool `json:"matches"`
}

// HandleReceiptSubject handles "POST /api/receipts/subject": the
// organization asks whether a person is the subject of one of its
// receipts, a consent or an erasure receipt. The subject is a hash under a
// salt only flowd knows, so no one else can.
func (h *Handler) HandleReceiptSubject(c echo.Context) error {
	var req subjectCheckRequest
	if err := httpkit.DecodeJSON(c, &req); err != nil {
		return err
	}
	var problems apperr.Fields
	person, err := h.flows.CanonicalNationalID(strings.TrimSpace(req.NationalID))
	switch {
	case strings.TrimSpace(req.NationalID) == "" || len(req.NationalID) > 64:
		problems.Add("nationalId", "is required: the national id to check, at most 64 characters")
	case err != nil:
		problems.Add("nationalId", "%s", err.Error())
	}
	organizationID, subject, reason, err := h.receiptSubject(c.Request().Context(), req.Receipt)
	switch {
	case err != nil:
		return err
	case reason != "":
		problems.Add("receipt", "%s", reason)
	case organizationID != callerOf(c).OrganizationID:
		problems.Add("receipt", "is a receipt of another organization")
	}
	if err := problems.Err(); err != nil {
		return err
	}
	matches, err := h.receipts.SubjectMatches(c.Request().Context(), organizationID, subject, person)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(c, http.StatusOK, subjectCheck{Matches: matches})
}

// receiptSubject checks jws, a consent or an erasure receipt, and returns
// the organization it was issued to and the subject it names; reason says
// why it is not a receipt flowd signed.
func (h *Handler) receiptSubject(ctx context.Context, jws string) (organizationID, subject, reason string, err error) {
	if erasure.IsReceipt(jws) {
		v, err := h.erasures.Verify(ctx, jws)
		var bad *erasure.InvalidReceiptError
		if errors.As(err, &bad) {
			return "", "", bad.Reason, nil
		}
		return v.Receipt.OrganizationID, v.Receipt.Subject, "", err
	}
	v, err := h.receipts.Verify(ctx, jws)
	var bad *receipts.InvalidError
	if errors.As(err, &bad) {
		return "", "", bad.Reason, nil
	}
	return v.Receipt.OrganizationID, v.Receipt.Subject, "", err
}
