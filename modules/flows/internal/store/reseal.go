package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Key rotation reads the stale rows of every organization without locking
// them, since a statement over every organization's rows cannot lock them
// on Citus, and writes each back only while it is still sealed under the
// key it was read with: a row another re-sealer got to first is left alone.
// Personal data never changes otherwise, so nothing else can be lost.

// SealContext binds a flow's sealed field to the flow, so that it cannot be
// moved to another row. It is in parts: pii.Sealer.Open joins them in a
// reused buffer, and a list page opens ten national ids.
func SealContext(flowID, field string) []string { return []string{"flow:", flowID, ":", field} }

var sealedFlowRows = newTable[SealedFlow]()

// SealedFlow is the personal data of one flow row, as sealed under KeyID.
type SealedFlow struct {
	OrganizationID   string    `db:"organization_id"`
	ID               string    `db:"id"`
	KeyID            string    `db:"pii_key_id"`
	NationalIDSealed []byte    `db:"national_id_sealed"`
	LastNameSealed   []byte    `db:"last_name_sealed"`
	CreatedAt        time.Time `db:"created_at"` // when its national id was written, which a Swedish one is read against
}

// StaleFlows returns up to limit flows whose personal data is sealed under
// a data key other than keyID (not under a subject key).
func StaleFlows(ctx context.Context, db DB, keyID string, limit int) ([]SealedFlow, error) {
	return sealedFlowRows.all(db.Query(ctx, `select `+sealedFlowRows.columns+`
		from flows where pii_key_id <> $1 and subject_key_id is null order by id limit $2`, keyID, limit))
}

// Reseal stores a flow's personal data sealed again under keyID, unless it
// is no longer sealed under f.KeyID.
func Reseal(ctx context.Context, db DB, f SealedFlow, keyID string, nationalID, nationalIDHMAC, lastName []byte) error {
	_, err := db.Exec(ctx, `update flows set pii_key_id = $4, national_id_sealed = $5, national_id_hmac = $6,
		last_name_sealed = $7 where organization_id = $1 and id = $2 and pii_key_id = $3`,
		f.OrganizationID, f.ID, f.KeyID, keyID, nationalID, nationalIDHMAC, lastName)
	return err
}

// UnkeyedFlows returns up to limit flows after cursor, in the primary key's
// order, whose personal data is still sealed under a data key rather than
// under their person's subject key.
func UnkeyedFlows(ctx context.Context, db DB, after IndexCursor, limit int) ([]SealedFlow, error) {
	return afterCursor(ctx, db, sealedFlowRows, "flows", "subject_key_id is null", nil, after, limit)
}

// Analyze updates the planner's statistics of the tables a rekey or
// reindex reads and writes. Without them (a table bulk-loaded or restored
// since autovacuum last looked) the planner takes an organization's unkeyed
// flows for a few rows and hashes all of them for every batch.
func Analyze(ctx context.Context, db DB) error {
	_, err := db.Exec(ctx, `analyze flows, subject_keys, flow_uses`)
	return err
}

// CountUnkeyed counts the flows still sealed under a data key.
func CountUnkeyed(ctx context.Context, db DB) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `select count(*) from flows where subject_key_id is null`).Scan(&n)
	return n, err
}

// Rekeyed is a flow's personal data sealed again under a subject key.
type Rekeyed struct {
	Flow                                       SealedFlow // as it was read
	SubjectKeyID                               string
	NationalIDSealed, NationalIDHMAC, LastName []byte
}

// Rekey inserts keys, each unless its person has a live key already, and
// then stores each flow's personal data sealed under its subject key and
// drops the flow's own blind index (the key's row holds it), unless the
// flow is no longer sealed as it was read or its key is not a live one: a
// statement per organization for each, in one round trip. It returns the
// ids of the flows it moved; the others' people had a key already, or
// they changed meanwhile.
func Rekey(ctx context.Context, db DB, keys []NewSubjectKey, rekeyed []Rekeyed) (map[string]bool, error) {
	if len(rekeyed) == 0 {
		return map[string]bool{}, nil
	}
	var b pgx.Batch
	// A batch's statements are planned for its arguments: a plan made for
	// any arguments, and kept, would have been made while subject_keys was
	// small, and a batch is worth planning.
	b.Queue(`select set_config('plan_cache_mode', 'force_custom_plan', true)`)
	queueInsertSubjectKeys(&b, keys)
	inserts := b.Len()
	for _, run := range byOrganization(rekeyed, func(r Rekeyed) string { return r.Flow.OrganizationID }) {
		b.Queue(rekeySQL, run[0].Flow.OrganizationID,
			arrayOf(run, func(r Rekeyed) string { return r.Flow.ID }),
			arrayOf(run, func(r Rekeyed) string { return r.Flow.KeyID }),
			arrayOf(run, func(r Rekeyed) string { return r.SubjectKeyID }),
			arrayOf(run, func(r Rekeyed) []byte { return r.NationalIDSealed }),
			arrayOf(run, func(r Rekeyed) []byte { return r.NationalIDHMAC }),
			arrayOf(run, func(r Rekeyed) []byte { return r.LastName }))
	}
	br := db.SendBatch(ctx, &b)
	defer br.Close()
	for range inserts { // the plan cache mode, then the keys
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	moved := map[string]bool{}
	for range b.Len() - inserts {
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			moved[id] = true
		}
	}
	return moved, br.Close()
}

const rekeySQL = `update flows f set subject_key_id = v.subject_key_id, pii_key_id = '` + SubjectSealed + `',
		national_id_sealed = v.national_id_sealed, national_id_hmac = v.national_id_hmac, last_name_sealed = v.last_name_sealed,
		person_index = null, person_index_key = null
	from unnest($2::text[]::uuid[], $3::text[], $4::text[]::uuid[], $5::bytea[], $6::bytea[], $7::bytea[])
		as v(id, pii_key_id, subject_key_id, national_id_sealed, national_id_hmac, last_name_sealed)
	where f.organization_id = $1 and f.id = v.id and f.pii_key_id = v.pii_key_id and f.subject_key_id is null
		and exists (select 1 from subject_keys k where k.organization_id = $1 and k.id = v.subject_key_id and k.key_sealed is not null)
	returning f.id::text`

// SubjectSealed is the pii_key_id of a flow whose personal data is sealed
// under its subject key (subject_key_id) rather than a data key.
const SubjectSealed = "subject"

// FlowsUnderKey returns the flows of organizationID sealed under the
// subject key keyID, locked for update.
func FlowsUnderKey(ctx context.Context, db DB, organizationID, keyID string) ([]SealedFlow, error) {
	return sealedFlowRows.all(db.Query(ctx, `select `+sealedFlowRows.columns+` from flows
		where organization_id = $1 and subject_key_id = $2 order by id for update`, organizationID, keyID))
}

// Rehomed is a flow's personal data sealed again under another subject key.
type Rehomed struct {
	Flow                                       SealedFlow
	From, To                                   string // the subject keys
	NationalIDSealed, NationalIDHMAC, LastName []byte
}

// Rehome stores a flow's personal data sealed under another subject key,
// unless it is no longer sealed under r.From.
func Rehome(ctx context.Context, db DB, r Rehomed) error {
	_, err := db.Exec(ctx, `update flows set subject_key_id = $4, national_id_sealed = $5, national_id_hmac = $6,
		last_name_sealed = $7 where organization_id = $1 and id = $2 and subject_key_id = $3`,
		r.Flow.OrganizationID, r.Flow.ID, r.From, r.To, r.NationalIDSealed, r.NationalIDHMAC, r.LastName)
	return err
}
