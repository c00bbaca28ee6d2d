package flows

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/flowd/flowd/modules/flows/internal/store"
)

// The mappings between the domain's flows and the store's rows: a new
// stored field of a flow is mapped here, and model_test.go fails for one
// that a mapping forgot.

// newRow is the row of a new flow of c's organization, as in asks for it,
// unopened and active, with its personal data sealed, running the
// definition version pinned. The store draws its number and reference id,
// and the database sets its times.
func (m *Manager) newRow(c Caller, in NewFlow, flowID string, settings OrganizationSettings, pinned PinnedDefinition) store.Flow {
	return store.Flow{
		ID: flowID, OrganizationID: c.OrganizationID,
		ConsentStatus: string(Unopened), ProcessStatus: string(Active),
		Sandbox: c.Sandbox, PIIKeyID: m.sealer.KeyID(),
		NationalIDSealed: m.sealer.Seal(in.NationalID, store.SealContext(flowID, "nationalId")...),
		NationalIDHMAC:   m.sealer.Hash("nationalId", in.NationalID),
		LastNameSealed:   m.sealer.Seal(in.LastName, store.SealContext(flowID, "lastName")...),
		RedirectURL:      in.RedirectURL, WebhookURL: in.WebhookURL,
		ReferenceName:      orNil(in.ReferenceName),
		OrganizationNumber: settings.OrganizationNumber,
		ProcessInstanceID:  uuid.NewString(),
		FlowDefinitionID:   pinned.ID, FlowDefinitionVersion: pinned.Version, VersionTag: orNil(pinned.Tag),
		CreatedBy:   c.ClientID,
		PersonIndex: m.personIndexOf(in.NationalID), PersonIndexKey: m.personIndexVersion(),
	}
}

// personIndexOf is the blind index of a new flow's national id; nil without
// an index key.
func (m *Manager) personIndexOf(nationalID string) []byte {
	if m.cfg.PersonIndex == nil {
		return nil
	}
	return m.cfg.PersonIndex.Of(nationalID)
}

func (m *Manager) personIndexVersion() *string {
	if m.cfg.PersonIndex == nil {
		return nil
	}
	return orNil(m.cfg.PersonIndex.Version())
}

// toFlow opens a row's personal data.
func (m *Manager) toFlow(r store.Flow) (Flow, error) {
	nationalID, err := m.openNationalID(r.ID, r.PIIKeyID, r.NationalIDSealed)
	if err != nil {
		return Flow{}, err
	}
	lastName, err := m.sealer.Open(r.PIIKeyID, r.LastNameSealed, store.SealContext(r.ID, "lastName")...)
	if err != nil {
		return Flow{}, fmt.Errorf("flows: flow %s: last name: %w", r.ID, err)
	}
	return Flow{
		ID: r.ID, OrganizationID: r.OrganizationID, Number: r.Number, ReferenceID: r.ReferenceID,
		ReferenceName: deref(r.ReferenceName),
		Version:       r.Version, ConsentStatus: ConsentStatus(r.ConsentStatus), ProcessStatus: ProcessStatus(r.ProcessStatus),
		Sandbox: r.Sandbox, NationalID: nationalID, LastName: lastName, RedirectURL: r.RedirectURL,
		WebhookURL: r.WebhookURL, OrganizationNumber: r.OrganizationNumber, ProcessInstanceID: r.ProcessInstanceID,
		FlowDefinitionID: r.FlowDefinitionID, FlowDefinitionVersion: r.FlowDefinitionVersion,
		VersionTag: deref(r.VersionTag),
		CreatedAt:  r.CreatedAt, UpdatedAt: r.UpdatedAt,
		OpenedAt: r.OpenedAt, DecidedAt: r.DecidedAt, WithdrawnAt: r.WithdrawnAt, WithdrawnBy: deref(r.WithdrawnBy),
		ExpiredAt: r.ExpiredAt, ExpiresAt: r.ExpiresAt, HasErrors: r.HasErrors, NumAttachments: r.NumAttachments,
		NumUses: r.NumUses, LastUsedAt: r.LastUsedAt, ExpiringNotifiedAt: r.ExpiringNotifiedAt,
		Evidence: Evidence{TextSHA256: r.ConsentTextSHA256, ACR: deref(r.ACR), Language: deref(r.ConsentLanguage),
			AssuranceLevel: deref(r.AssuranceLevel), ValidUntil: r.ValidUntil},
	}, nil
}

// toSummary opens a listed row's national id; the row is a flow of
// organizationID.
func (m *Manager) toSummary(r store.FlowSummary, organizationID string) (FlowSummary, error) {
	nationalID, err := m.openNationalID(r.ID, r.PIIKeyID, r.NationalIDSealed)
	if err != nil {
		return FlowSummary{}, err
	}
	return FlowSummary{
		ID: r.ID, OrganizationID: organizationID, Number: r.Number, ReferenceID: r.ReferenceID,
		ReferenceName: deref(r.ReferenceName),
		ConsentStatus: ConsentStatus(r.ConsentStatus), ProcessStatus: ProcessStatus(r.ProcessStatus),
		Sandbox: r.Sandbox, FlowDefinitionID: r.FlowDefinitionID, NationalID: nationalID,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}, nil
}

func (m *Manager) openNationalID(flowID, keyID string, sealed []byte) (string, error) {
	nationalID, err := m.sealer.Open(keyID, sealed, store.SealContext(flowID, "nationalId")...)
	if err != nil {
		return "", fmt.Errorf("flows: flow %s: national id: %w", flowID, err)
	}
	return nationalID, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
