package store

import (
	"context"
)

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

var unindexedRows = newTable[SealedFlow]()

// UnindexedFlows returns up to limit flows after cursor, in the primary
// key's order, whose blind index is missing or made under a key other than
// version, among those not yet under a subject key (whose key holds it).
func UnindexedFlows(ctx context.Context, db DB, version string, after IndexCursor, limit int) ([]SealedFlow, error) {
	return afterCursor(ctx, db, unindexedRows, "flows", "subject_key_id is null and person_index_key is distinct from $1",
		[]any{version}, after, limit)
}

// CountUnindexed counts the flows whose blind index is missing or made
// under a key other than version.
func CountUnindexed(ctx context.Context, db DB, version string) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `select count(*) from flows where subject_key_id is null and person_index_key is distinct from $1`, version).Scan(&n)
	return n, err
}

// Indexed is a flow's blind index, made from its national id as read.
type Indexed struct {
	Flow  SealedFlow
	Index []byte
}

// SetPersonIndexes stores each flow's blind index under version, unless its
// national id has been sealed again since it was read (then the next run
// reads it anew): a statement per organization, in one round trip.
func SetPersonIndexes(ctx context.Context, db DB, indexed []Indexed, version string) error {
	return sendByOrganization(ctx, db, indexed, func(x Indexed) string { return x.Flow.OrganizationID }, setPersonIndexesSQL,
		func(run []Indexed) []any {
			return []any{version, arrayOf(run, func(x Indexed) string { return x.Flow.ID }),
				arrayOf(run, func(x Indexed) string { return x.Flow.KeyID }), arrayOf(run, func(x Indexed) []byte { return x.Index })}
		})
}

const setPersonIndexesSQL = `update flows f set person_index = v.person_index, person_index_key = $2
	from unnest($3::text[]::uuid[], $4::text[], $5::bytea[]) as v(id, pii_key_id, person_index)
	where f.organization_id = $1 and f.id = v.id and f.pii_key_id = v.pii_key_id`
