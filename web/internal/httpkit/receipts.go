package httpkit

import (
	"errors"
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/consent/receipts"
)

// ReceiptVerification is whether flowd signed a receipt, and what it says
// when it did: the answer of POST /api/receipts/verify, which the public
// page shows too.
type ReceiptVerification struct {
	Valid   bool              `json:"valid"`
	Reason  *string           `json:"reason"` // why not, when not valid
	KeyID   *string           `json:"keyId"`
	Receipt *receipts.Receipt `json:"receipt"`
}

// VerifyReceipt checks jws for the API and the public page alike. A receipt
// that does not verify is an answer, not an error; a failure to check one
// is logged and answered as a reason to try again.
func VerifyReceipt(c echo.Context, checker receipts.Checker, log *slog.Logger, jws string) ReceiptVerification {
	v, err := checker.Verify(c.Request().Context(), jws)
	var bad *receipts.InvalidError
	switch {
	case errors.As(err, &bad):
		reason := "The receipt is not valid: " + bad.Reason + "."
		return ReceiptVerification{Reason: &reason}
	case err != nil:
		log.ErrorContext(c.Request().Context(), "verifying a receipt", "error", err.Error())
		reason := "The receipt could not be checked right now. Try again later."
		return ReceiptVerification{Reason: &reason}
	}
	return ReceiptVerification{Valid: true, KeyID: &v.KeyID, Receipt: &v.Receipt}
}
