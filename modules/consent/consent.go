// Package consent is the individual's side of a flow: the unguessable consent
// link, the proof of identity, and the final Accept or Reject, and the
// withdrawal of an acceptance by the person or by the organization. Consent
// decides and signs each decision's and withdrawal's receipt; the flows
// module, which owns the flow's state, records them through the small Flows
// interface this module declares, and publishes their events.
package consent

import (
	"context"
	"errors"

	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/flows"
)

// Errors of the consent journey.
var (
	ErrUnknownLink = errors.New("unknown consent link")
	ErrClosed      = errors.New("consent request is no longer open") // decided, cancelled, expired
)

// ErrAssuranceTooLow means the eID sign-in was not sure enough of the
// person for the definition: they must sign in again with a stronger eID.
var ErrAssuranceTooLow = errors.New("the eID sign-in does not reach the assurance level the consent requires")

// AssuranceError is the ErrAssuranceTooLow of one sign-in: Required is the
// definition's level, and ACR what the eID must be asked for to reach it.
type AssuranceError struct {
	Required assurance.Level
	ACR      string
}

func (e *AssuranceError) Error() string {
	return ErrAssuranceTooLow.Error() + ": " + string(e.Required) + " is required"
}

// Is makes errors.Is(err, ErrAssuranceTooLow) hold for every AssuranceError.
func (e *AssuranceError) Is(target error) bool { return target == ErrAssuranceTooLow }

// FlowRef names a flow of an organization: what a consent link leads to.
type FlowRef struct{ OrganizationID, FlowID string }

// Withdrawals is the organization's side of a withdrawal, through the API or
// the console.
type Withdrawals interface {
	// Withdraw withdraws the accepted consent of the caller's flow on the
	// person's behalf (flow.withdrawn) and signs the withdrawal's receipt,
	// which names the organization as who withdrew. cond is checked against
	// the flow's ETag under the withdrawal's lock: when it does not hold,
	// the withdrawal is an apperr PreconditionFailed error and changes
	// nothing. before runs in the withdrawal's transaction with the
	// withdrawn flow as flows.Service.Get would show it (see
	// database.BeforeCommit); its error leaves the consent accepted and is
	// returned. flows.ErrNotFound, flows.ErrNotAccepted.
	Withdraw(ctx context.Context, c flows.Caller, flowID string, cond etag.IfMatch,
		before ...database.BeforeCommit[flows.Flow]) (flows.Flow, error)
}
