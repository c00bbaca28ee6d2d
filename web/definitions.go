package web

import (
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/web/api"
)

// The API's consent definition, which `flowd definitions` reads and prints
// too, so that the command and the API speak the same JSON.
type (
	FlowDefinition      = api.FlowDefinition
	FlowDefinitionDraft = api.FlowDefinitionDraft
)

// NewFlowDefinition renders p as the API shows it.
func NewFlowDefinition(p consent.Published) FlowDefinition { return api.NewFlowDefinition(p) }
