package wiring

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity/tokens"
)

// ConsentSource is what the token service's consent tokens ask of the flows
// and consent modules (tokens.Consents), in their words: the flow and the
// definition version it pinned, the data holders' resources, and the use
// each token is on the flow's ledger.
type ConsentSource struct {
	flows     flows.Service
	texts     consent.Texts
	resources consent.Resources
	names     consent.OrganizationNames
	format    string // the national id format's name
}

var _ tokens.Consents = ConsentSource{}

// NewConsentSource returns the consents of flowsModule, whose definition
// versions texts gives, with the resources and the organizations' names;
// national ids are of format.
func NewConsentSource(flowsModule flows.Service, texts consent.Texts, resources consent.Resources,
	names consent.OrganizationNames, format string) ConsentSource {
	return ConsentSource{flows: flowsModule, texts: texts, resources: resources, names: names, format: format}
}

// NewConsentTokens is the token service of ident issuing consent tokens of
// m's flows, each living FLOWD_CONSENT_TOKEN_TTL at most.
func NewConsentTokens(env Env, ident *Identity, m *Modules) (*tokens.ConsentTokens, error) {
	source := NewConsentSource(m.Flows, m.Definitions, m.Resources, m.Directory, env.Config.NationalIDFormat)
	return tokens.NewConsentTokens(ident.Tokens, source, env.Config.ConsentTokenTTL)
}

// Consent implements tokens.Consents.
func (s ConsentSource) Consent(ctx context.Context, organizationID, flowID string) (tokens.Consent, error) {
	f, err := s.flows.Get(ctx, flows.Caller{OrganizationID: organizationID}, flowID)
	if errors.Is(err, flows.ErrNotFound) {
		return tokens.Consent{}, tokens.ErrNoConsent
	}
	if err != nil {
		return tokens.Consent{}, err
	}
	return s.consentOf(ctx, f)
}

// consentOf is f's consent as a token carries it.
func (s ConsentSource) consentOf(ctx context.Context, f flows.Flow) (tokens.Consent, error) {
	v, err := s.texts.Version(ctx, f.OrganizationID, f.FlowDefinitionID, f.FlowDefinitionVersion)
	if err != nil {
		return tokens.Consent{}, fmt.Errorf("wiring: the definition of flow %s: %w", f.ID, err)
	}
	name, err := s.names.OrganizationName(ctx, f.OrganizationID)
	if err != nil {
		return tokens.Consent{}, err
	}
	c := tokens.Consent{FlowID: f.ID, OrganizationID: f.OrganizationID, OrganizationName: name,
		NationalIDFormat: s.format, NationalID: f.Person, Status: string(f.ConsentStatus), ValidUntil: f.Evidence.ValidUntil,
		Resources: v.Resources, Parameters: f.Parameters, DefinitionID: f.FlowDefinitionID,
		DefinitionVersion: f.FlowDefinitionVersion, TextSHA256: f.Evidence.TextSHA256}
	if f.DecidedAt != nil {
		c.DecidedAt = *f.DecidedAt
	}
	return c, nil
}

// Resource implements tokens.Consents.
func (s ConsentSource) Resource(ctx context.Context, uri string) (tokens.Resource, error) {
	r, err := s.resources.ResourceByURI(ctx, uri)
	if errors.Is(err, consent.ErrResourceNotFound) {
		return tokens.Resource{}, tokens.ErrUnknownResource
	}
	if err != nil {
		return tokens.Resource{}, err
	}
	return tokens.Resource{URI: r.URI, Name: r.Name, OrganizationID: r.OrganizationID}, nil
}

// RecordTokenUse implements tokens.Consents: the use's action is
// flows.ActionConsentToken, its reference the token's jti.
func (s ConsentSource) RecordTokenUse(ctx context.Context, u tokens.ConsentUse, check func(tokens.Consent) error,
	refused func(ctx context.Context, tx database.Tx) error) error {
	_, err := s.flows.RecordUse(ctx, flows.Caller{OrganizationID: u.OrganizationID, ClientID: u.ClientID}, u.FlowID,
		flows.NewUse{Action: flows.ActionConsentToken, Resource: u.Resource, Reference: "token " + u.TokenID,
			Check: func(f flows.Flow) error {
				c, err := s.consentOf(ctx, f)
				if err != nil {
					return err
				}
				return check(c)
			}},
		func(ctx context.Context, tx database.Tx, _ flows.Flow) error { return refused(ctx, tx) })
	switch {
	case errors.Is(err, flows.ErrConsentNotInForce):
		return tokens.ErrConsentNotInForce
	case errors.Is(err, flows.ErrNotFound):
		return tokens.ErrNoConsent
	}
	return err
}
