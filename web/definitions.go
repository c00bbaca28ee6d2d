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

// ResourceJSON is the API's resource, which `flowd resources` prints too.
type ResourceJSON = api.ResourceJSON

// NewResourceJSON renders r as the API shows it.
func NewResourceJSON(r consent.Resource) ResourceJSON { return api.NewResourceJSON(r) }
