package wiring

import (
	"context"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// OrganizationDirectory answers what other modules ask of the identity
// module's organizations, each in its own words: flows' settings, the name
// the consent page shows, and the audit record of a consent identity
// mismatch.
type OrganizationDirectory struct {
	orgs  orgs.Organizations
	audit audit.Log
}

// NewOrganizationDirectory is the directory of organizations, whose
// identity mismatches it records in log.
func NewOrganizationDirectory(organizations orgs.Organizations, log audit.Log) OrganizationDirectory {
	return OrganizationDirectory{orgs: organizations, audit: log}
}

// FlowSettings implements flows.Organizations.
func (d OrganizationDirectory) FlowSettings(ctx context.Context, organizationID string) (flows.OrganizationSettings, error) {
	org, err := d.orgs.Organization(ctx, organizationID)
	if err != nil {
		return flows.OrganizationSettings{}, err
	}
	return flows.OrganizationSettings{ReferencePrefix: org.ReferencePrefix, OrganizationNumber: org.OrganizationNumber,
		RedirectOrigins: org.RedirectOrigins}, nil
}

// OrganizationName implements consent.OrganizationNames.
func (d OrganizationDirectory) OrganizationName(ctx context.Context, organizationID string) (string, error) {
	org, err := d.orgs.Organization(ctx, organizationID)
	if err != nil {
		return "", err
	}
	return org.Name, nil
}

// RecordIdentityMismatchTx implements consent.MismatchRecorder: the
// organization's audit log shows that someone proved another identity on one
// of its consent links.
func (d OrganizationDirectory) RecordIdentityMismatchTx(ctx context.Context, tx database.Tx, organizationID, flowID, referenceID string) error {
	return d.audit.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: organizationID, Actor: "end-user",
		Action: "consent.identity_mismatch", Target: referenceID, Detail: "flow " + flowID})
}
