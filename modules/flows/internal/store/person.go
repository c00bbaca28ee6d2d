package store

import "context"

// FlowsOfPerson returns up to limit flows, newest first, of every
// organization whose blind index is index under key version: kept by the
// flow itself until it is rekeyed, and by its live subject key after. Each
// is an index lookup, which on Citus each shard makes in its own index.
func FlowsOfPerson(ctx context.Context, db DB, index []byte, version string, limit int) ([]Flow, error) {
	return flowRows.all(db.Query(ctx, `select `+flowRows.columns+` from flows
		where person_index = $1 and person_index_key = $2
		union all
		select `+flowRows.columns+` from flows where (organization_id, subject_key_id) in (
			select organization_id, id from subject_keys
			where person_index = $1 and person_index_key = $2 and destroyed_at is null)
		order by created_at desc, id desc limit $3`, index, version, limit))
}

// IndexCursor is where a re-index stands: the last flow it looked at, in
// the primary key's order.
type IndexCursor struct{ OrganizationID, ID string }

var unindexedRows = newTable[SealedFlow]()

// UnindexedFlows returns up to limit flows after cursor, in the primary
// key's order, whose blind index is missing or made under a key other than
// version, among those not yet under a subject key (whose key holds it).
func UnindexedFlows(ctx context.Context, db DB, version string, after IndexCursor, limit int) ([]SealedFlow, error) {
	if after.ID == "" {
		after.ID = "00000000-0000-0000-0000-000000000000"
	}
	return unindexedRows.all(db.Query(ctx, `select `+unindexedRows.columns+` from flows
		where (organization_id, id) > ($2, $3::uuid) and subject_key_id is null and person_index_key is distinct from $1
		order by organization_id, id limit $4`, version, after.OrganizationID, after.ID, limit))
}

// CountUnindexed counts the flows whose blind index is missing or made
// under a key other than version.
func CountUnindexed(ctx context.Context, db DB, version string) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `select count(*) from flows where subject_key_id is null and person_index_key is distinct from $1`, version).Scan(&n)
	return n, err
}

// SetPersonIndex stores a flow's blind index under version, unless its
// national id has been sealed again since it was read (then the next run
// reads it anew).
func SetPersonIndex(ctx context.Context, db DB, f SealedFlow, index []byte, version string) error {
	_, err := db.Exec(ctx, `update flows set person_index = $4, person_index_key = $5
		where organization_id = $1 and id = $2 and pii_key_id = $3`, f.OrganizationID, f.ID, f.KeyID, index, version)
	return err
}
