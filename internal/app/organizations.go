package app

import (
	"context"
	"errors"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
)

// organizationDirectory answers what other modules ask of the identity
// module's organizations, each in its own words: flows' settings, the name
// the consent page shows, whether a staff account's organization exists, and
// the audit record of a consent identity mismatch.
type organizationDirectory struct{ ident *identity.Module }

// FlowSettings implements flows.Organizations.
func (d organizationDirectory) FlowSettings(ctx context.Context, organizationID string) (flows.OrganizationSettings, error) {
	org, err := d.ident.Organization(ctx, organizationID)
	if err != nil {
		return flows.OrganizationSettings{}, err
	}
	return flows.OrganizationSettings{ReferencePrefix: org.ReferencePrefix, OrganizationNumber: org.OrganizationNumber,
		RedirectOrigins: org.RedirectOrigins}, nil
}

// OrganizationName implements consent.OrganizationNames.
func (d organizationDirectory) OrganizationName(ctx context.Context, organizationID string) (string, error) {
	org, err := d.ident.Organization(ctx, organizationID)
	if err != nil {
		return "", err
	}
	return org.Name, nil
}

// OrganizationExists implements login.Organizations.
func (d organizationDirectory) OrganizationExists(ctx context.Context, organizationID string) (bool, error) {
	_, err := d.ident.Organization(ctx, organizationID)
	if errors.Is(err, identity.ErrOrganizationNotFound) {
		return false, nil
	}
	return err == nil, err
}

// RecordIdentityMismatchTx implements consent.MismatchRecorder: the
// organization's audit log shows that someone proved another identity on one
// of its consent links.
func (d organizationDirectory) RecordIdentityMismatchTx(ctx context.Context, tx database.Tx, organizationID, flowID, referenceID string) error {
	return d.ident.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: organizationID, Actor: "end-user",
		Action: "consent.identity_mismatch", Target: referenceID, Detail: "flow " + flowID})
}
