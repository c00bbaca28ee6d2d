package admin

import (
	"errors"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
)

// TestCLIErrorsTellTheCauseOfAFault: the API hides a fault's cause from its
// callers, but at the terminal the operator sees it, with the fields of a
// bad request spelled out as before.
func TestCLIErrorsTellTheCauseOfAFault(t *testing.T) {
	t.Parallel()
	cause := errors.New("failed to connect to `host=127.0.0.1`: dial error (timeout)")
	for _, code := range []apperr.Code{apperr.Unavailable, apperr.Internal} {
		err := oneLine(apperr.Wrap(cause, code, "The service is temporarily unavailable."), "--")
		if !errors.Is(err, cause) || !strings.Contains(err.Error(), "The service is temporarily unavailable. (failed to connect") {
			t.Errorf("%s: %v", code, err)
		}
	}
	bad := &apperr.Error{Code: apperr.Invalid, Message: "The request is invalid.", Fields: []apperr.FieldError{{Field: "role", Message: "must be admin or viewer"}}}
	if err := oneLine(bad, "--"); err.Error() != "The request is invalid. --role must be admin or viewer" {
		t.Errorf("a bad request: %v", err)
	}
}
