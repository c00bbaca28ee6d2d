package person

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/pages"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// maxPastedReceipt bounds the public page's form field: a receipt is about
// a kilobyte, and nothing longer is one.
const maxPastedReceipt = 16 << 10

// HandleReceiptVerifyPage handles "GET /receipts/verify" and
// "POST /receipts/verify": anyone pastes a receipt and sees whether flowd
// signed it and what it says. It changes nothing, so the form needs no CSRF
// token.
func (h *Handler) HandleReceiptVerifyPage(c echo.Context) error {
	frame := h.consentFrame(c)
	page := pages.ReceiptVerify{ConsentFrame: frame, ActionURL: "/receipts/verify"}
	if c.Request().Method == http.MethodPost {
		pasted := c.FormValue("receipt")
		if len(pasted) > maxPastedReceipt {
			pasted = pasted[:maxPastedReceipt]
		}
		page.Pasted, page.Checked = pasted, true
		v := httpkit.VerifyReceipt(c, h.receipts, h.erasures, h.log, pasted)
		page.Valid = v.Valid
		switch {
		case v.ErasureReceipt != nil:
			page.Receipt = erasureReceiptCard(frame, *v.ErasureReceipt)
		case v.Valid:
			page.Receipt = receiptCard(frame, *v.Receipt, "")
		case v.Reason != nil:
			page.Reason = *v.Reason
		}
	}
	return httpkit.Render(c, http.StatusOK, pages.ReceiptVerifyPage(page))
}

// receiptCard writes a receipt out in the page's language; jws, when
// given, is offered for download.
func receiptCard(frame pages.ConsentFrame, r receipts.Receipt, jws string) pages.ReceiptCard {
	t := frame.T
	card := pages.ReceiptCard{ID: r.ID, SignedAt: receiptTime(frame.Lang, r.IssuedAtTime())}
	switch r.Decision {
	case flows.DecisionAccepted:
		card.Heading = t.ReceiptAccepted
	case flows.DecisionRejected:
		card.Heading = t.ReceiptRejected
	default:
		card.Heading = t.ReceiptWithdrawn
	}
	line := func(label, value string, code bool) {
		card.Lines = append(card.Lines, pages.ReceiptLine{Label: label, Value: value, Code: code})
	}
	line(t.ReceiptSignedAt, card.SignedAt, false)
	// A receipt from before the recipient had a claim of its own names only
	// the recipient.
	organization, recipient := r.Parties()
	if organization != "" {
		line(t.ReceiptOrg, organization, false)
	}
	line(t.ReceiptRecipient, recipient, false)
	line(t.Reference, r.ReferenceID, false)
	line(t.ReceiptText, fmt.Sprintf(t.ReceiptVersion, r.Definition.ID, r.Definition.Version), false)
	line(t.ReceiptTextHash, r.Definition.TextSHA256, true)
	line(t.ReceiptLanguage, shownInLanguage(r.Definition.Language), false)
	if r.Assurance != nil {
		line(t.ReceiptAssurance, t.Level(r.Assurance.Level), false)
	} else {
		line(t.ReceiptAssurance, t.ReceiptNoProof, false)
	}
	if r.ValidUntil != "" {
		if until, err := time.Parse(time.RFC3339, r.ValidUntil); err == nil {
			line(t.ValidUntil, frame.Date(until), false)
		}
	}
	switch r.WithdrawnBy {
	case flows.ByIndividual:
		line(t.ReceiptWithdrawer, t.ReceiptByYou, false)
	case flows.ByOrganization:
		line(t.ReceiptWithdrawer, t.ReceiptByOrg, false)
	}
	if r.Previous != "" {
		line(t.ReceiptPrevious, r.Previous, true)
	}
	line(t.ReceiptSubject, r.Subject, true)
	line(t.ReceiptID, r.ID, true)
	if jws != "" {
		card.Download = "data:application/jwt;base64," + base64.StdEncoding.EncodeToString([]byte(jws))
		card.FileName = "consent-receipt-" + r.ReferenceID + "-" + r.Decision + ".jwt"
		card.DownloadAs = t.DownloadReceipt
	}
	return card
}

// receiptTime writes when a receipt was signed: its date and UTC time.
func receiptTime(l i18n.Lang, t time.Time) string {
	t = t.UTC()
	return i18n.FormatDate(l, t) + " " + t.Format("15:04") + " UTC"
}

// shownInLanguage names the language a text was shown in, in that language.
func shownInLanguage(code string) string {
	switch code {
	case "nb":
		return "norsk"
	case "en":
		return "English"
	}
	return strconv.Quote(code)
}

// erasureReceiptCard writes an erasure receipt out in the page's language.
func erasureReceiptCard(frame pages.ConsentFrame, r erasure.Receipt) pages.ReceiptCard {
	t := frame.T
	card := pages.ReceiptCard{ID: r.ID, Heading: t.ErasureReceipt, SignedAt: receiptTime(frame.Lang, time.Unix(r.IssuedAt, 0))}
	line := func(label, value string, code bool) {
		card.Lines = append(card.Lines, pages.ReceiptLine{Label: label, Value: value, Code: code})
	}
	when := func(s string) string {
		if at, err := time.Parse(time.RFC3339, s); err == nil {
			return receiptTime(frame.Lang, at)
		}
		return s
	}
	yesNo := func(b bool) string {
		if b {
			return t.Yes
		}
		return t.No
	}
	line(t.ErasureAt, when(r.ErasedAt), false)
	line(t.ErasureOrg, r.OrganizationName+" ("+r.OrganizationID+")", false)
	line(t.ErasureFlows, strconv.Itoa(r.FlowCount), false)
	line(t.ErasureReceiptsKept, yesNo(r.ReceiptsKept), false)
	if r.KeyDestroyedAt != nil {
		line(t.ErasureKeyDestroyed, when(*r.KeyDestroyedAt), false)
	}
	line(t.ErasureRetained, r.Retained, false)
	line(t.ErasureSubject, r.Subject, true)
	line(t.ReceiptID, r.ID, true)
	return card
}
