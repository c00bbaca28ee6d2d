package flows

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/store"
)

// The mappings between the domain's flows and the store's rows: a new
// stored field of a flow is mapped here, and model_test.go fails for one
// that a mapping forgot.

// newRow is the row of a new flow of c's organization, as in asks for it,
// unopened and active, running the definition version pinned, its personal
// data still to be sealed (insertUnderSubjectKey seals it). The store
// draws its number and reference id, and the database sets its times.
func (m *Manager) newRow(c Caller, in NewFlow, flowID string, settings OrganizationSettings, pinned PinnedDefinition) store.Flow {
	return store.Flow{
		ID: flowID, OrganizationID: c.OrganizationID,
		ConsentStatus: string(Unopened), ProcessStatus: string(Active),
		Sandbox: c.Sandbox, RedirectURL: in.RedirectURL, WebhookURL: in.WebhookURL,
		ReferenceName:      orNil(in.ReferenceName),
		OrganizationNumber: settings.OrganizationNumber,
		ProcessInstanceID:  uuid.NewString(),
		FlowDefinitionID:   pinned.ID, FlowDefinitionVersion: pinned.Version, VersionTag: orNil(pinned.Tag),
		Parameters: in.Parameters,
		CreatedBy:  c.ClientID,
	}
}

// toFlow opens a row's personal data, with the subject key its statement
// read with it. A row whose key is destroyed is errSubjectKeyDestroyed.
func (m *Manager) toFlow(r store.Flow) (Flow, error) {
	open, err := m.rowOpener(r.OrganizationID, r.PIIKeyID, r.SubjectKeyID, r.SubjectKeySealed)
	if err != nil {
		return Flow{}, fmt.Errorf("flows: flow %s: %w", r.ID, err)
	}
	return m.flowOf(r, open)
}

// flowOf is the Flow of a row whose personal data open opens, with the
// canonical form of its national id as read when the flow was made.
func (m *Manager) flowOf(r store.Flow, open opener) (Flow, error) {
	f, err := flowOf(r, open)
	if err != nil {
		return Flow{}, err
	}
	f.Person, _ = m.cfg.NationalIDs.OfKept(f.NationalID, f.CreatedAt)
	return f, nil
}

// opener opens a row's sealed personal data in its context.
type opener func(sealed []byte, context ...string) (string, error)

// sealerOpener opens with s what s sealed under its key keyID.
func sealerOpener(s *pii.Sealer, keyID string) opener {
	return func(sealed []byte, context ...string) (string, error) { return s.Open(keyID, sealed, context...) }
}

// flowOf is the Flow of a row whose personal data open opens.
func flowOf(r store.Flow, open opener) (Flow, error) {
	nationalID, err := openNationalID(open, r.ID, r.NationalIDSealed)
	if err != nil {
		return Flow{}, err
	}
	lastName, err := open(r.LastNameSealed, store.SealContext(r.ID, "lastName")...)
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
		VersionTag: deref(r.VersionTag), Parameters: r.Parameters,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
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
	open, err := m.rowOpener(organizationID, r.PIIKeyID, r.SubjectKeyID, r.SubjectKeySealed)
	if err != nil {
		return FlowSummary{}, fmt.Errorf("flows: flow %s: %w", r.ID, err)
	}
	nationalID, err := openNationalID(open, r.ID, r.NationalIDSealed)
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

func openNationalID(open opener, flowID string, sealed []byte) (string, error) {
	nationalID, err := open(sealed, store.SealContext(flowID, "nationalId")...)
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
