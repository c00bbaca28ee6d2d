// Package consent is the individual's side of a flow: the unguessable consent
// link, the proof of identity, and the final Accept or Reject. The flow's
// state itself belongs to the flows module, which this module moves along
// through the small Flows interface it declares.
package consent

import (
	"errors"
)

// Errors of the consent journey.
var (
	ErrUnknownLink = errors.New("unknown consent link")
	ErrClosed      = errors.New("consent request is no longer open") // decided, cancelled, expired
)

// FlowRef names a flow of an organization: what a consent link leads to.
type FlowRef struct{ OrganizationID, FlowID string }
