package httpkit

import (
	"context"
	"errors"
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/erasure"
)

// ReceiptVerification is whether flowd signed a receipt, and what it says
// when it did: the answer of POST /api/receipts/verify, which the public
// page shows too. An erasure receipt's claims are in ErasureReceipt, a
// consent receipt's in Receipt.
type ReceiptVerification struct {
	Valid          bool              `json:"valid"`
	Reason         *string           `json:"reason"` // why not, when not valid
	KeyID          *string           `json:"keyId"`
	Receipt        *receipts.Receipt `json:"receipt"`
	ErasureReceipt *erasure.Receipt  `json:"erasureReceipt,omitempty"`
}

// ErasureReceipts checks erasure receipts: the erasure module.
type ErasureReceipts interface {
	Verify(ctx context.Context, jws string) (erasure.VerifiedReceipt, error)
}

// VerifyReceipt checks jws, a consent or an erasure receipt, for the API
// and the public page alike. A receipt that does not verify is an answer,
// not an error; a failure to check one is logged and answered as a reason
// to try again.
func VerifyReceipt(c echo.Context, checker receipts.Checker, erasures ErasureReceipts, log *slog.Logger, jws string) ReceiptVerification {
	failed := func(err error) ReceiptVerification {
		log.ErrorContext(c.Request().Context(), "verifying a receipt", "error", err.Error())
		reason := "The receipt could not be checked right now. Try again later."
		return ReceiptVerification{Reason: &reason}
	}
	if erasure.IsReceipt(jws) {
		v, err := erasures.Verify(c.Request().Context(), jws)
		var bad *erasure.InvalidReceiptError
		switch {
		case errors.As(err, &bad):
			reason := "The receipt is not valid: " + bad.Reason + "."
			return ReceiptVerification{Reason: &reason}
		case err != nil:
			return failed(err)
		}
		return ReceiptVerification{Valid: true, KeyID: &v.KeyID, ErasureReceipt: &v.Receipt}
	}
	v, err := checker.Verify(c.Request().Context(), jws)
	var bad *receipts.InvalidError
	switch {
	case errors.As(err, &bad):
		reason := "The receipt is not valid: " + bad.Reason + "."
		return ReceiptVerification{Reason: &reason}
	case err != nil:
		return failed(err)
	}
	return ReceiptVerification{Valid: true, KeyID: &v.KeyID, Receipt: &v.Receipt}
}
