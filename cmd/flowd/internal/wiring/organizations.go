package wiring

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent"
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

// RecordPersonPageTx implements consent.PersonPageRecorder: the
// organization's audit log shows each view of the person's own page that
// listed its flows, and each withdrawal from it, by the flows' references.
func (d OrganizationDirectory) RecordPersonPageTx(ctx context.Context, tx database.Tx, organizationID, action string, referenceIDs []string) error {
	return d.audit.RecordAuditTx(ctx, tx, personPageEntry(organizationID, action, referenceIDs, ""))
}

// QueuePersonPage implements consent.PersonPageRecorder: the entries of
// every organization concerned, in one statement, or, coalesced within a
// window, in one statement each.
func (d OrganizationDirectory) QueuePersonPage(b *database.Batch, action string, records []consent.PersonPageRecord, within time.Duration) error {
	entries := make([]identity.AuditEntry, len(records))
	for i, r := range records {
		entries[i] = personPageEntry(r.OrganizationID, action, r.ReferenceIDs, r.Session)
	}
	if within > 0 {
		return d.audit.QueueAuditOnce(b, entries, within)
	}
	return d.audit.QueueAudit(b, entries)
}

// personPageEntry is the audit entry of what the person's own page did to
// an organization's flows named by referenceIDs, in the sign-in session
// (empty when unknown).
func personPageEntry(organizationID, action string, referenceIDs []string, session string) identity.AuditEntry {
	detail := fmt.Sprintf("%d flows", len(referenceIDs))
	if session != "" {
		detail += ", sign-in " + session
	}
	return identity.AuditEntry{OrganizationID: organizationID, Actor: "end-user",
		Action: action, Target: referenceList(referenceIDs, 200), Detail: detail}
}

// referenceList joins references with commas, cut to at most limit bytes
// on a reference's end, with "…" when some are left out.
func referenceList(refs []string, limit int) string {
	var b strings.Builder
	for i, r := range refs {
		sep := ""
		if i > 0 {
			sep = ", "
		}
		if b.Len()+len(sep)+len(r) > limit-len("…") {
			b.WriteString("…")
			break
		}
		b.WriteString(sep + r)
	}
	return b.String()
}
