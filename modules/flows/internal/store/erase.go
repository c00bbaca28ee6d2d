package store

import (
	"context"
	"time"
)

// LockFlowsOfSubject returns the organization's flows sealed under one of
// the subject keys keyIDs, and those not yet under a subject key whose
// national id hashes to one of hashes or whose blind index is one of
// indexes, locked for update in the primary key's order: a person's
// flows, and the candidates among the older ones, which the caller
// confirms by their national id.
func LockFlowsOfSubject(ctx context.Context, db DB, organizationID string, keyIDs []string, hashes, indexes [][]byte) ([]Flow, error) {
	return flowRows.all(db.Query(ctx, `select `+flowColumns+` from flows
		where organization_id = $1 and (subject_key_id = any($4::uuid[]) or subject_key_id is null
			and (national_id_hmac = any($2) or person_index = any($3)))
		order by id for update`, organizationID, hashes, indexes, keyIDs))
}

// OrganizationFlowsAfter returns up to limit of the organization's flows
// after the flow afterID (the first when empty), in the primary key's
// order: the pages of a scan for a person.
func OrganizationFlowsAfter(ctx context.Context, db DB, organizationID, afterID string, limit int) ([]Flow, error) {
	if afterID == "" {
		afterID = "00000000-0000-0000-0000-000000000000"
	}
	return flowRows.all(db.Query(ctx, `select `+flowColumns+` from flows
		where organization_id = $1 and id > $2::uuid order by id limit $3`, organizationID, afterID, limit))
}

// LockRetained returns up to limit completed flows of one definition
// version of organizationID decided before cutoff, locked for update in
// the primary key's order; the flows another transaction holds are left
// to it.
func LockRetained(ctx context.Context, db DB, organizationID, definitionID string, version int, cutoff time.Time, limit int) ([]Flow, error) {
	return flowRows.all(db.Query(ctx, `select `+flowColumns+` from flows
		where organization_id = $1 and flow_definition_id = $2 and flow_definition_version = $3
			and process_status = 'completed' and decided_at < $4
		order by id limit $5 for update skip locked`, organizationID, definitionID, version, cutoff, limit))
}
