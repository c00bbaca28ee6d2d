package store

import "context"

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
	OrganizationID   string `db:"organization_id"`
	ID               string `db:"id"`
	KeyID            string `db:"pii_key_id"`
	NationalIDSealed []byte `db:"national_id_sealed"`
	LastNameSealed   []byte `db:"last_name_sealed"`
}

// StaleFlows returns up to limit flows whose personal data is sealed under
// a key other than keyID.
func StaleFlows(ctx context.Context, db DB, keyID string, limit int) ([]SealedFlow, error) {
	return sealedFlowRows.all(db.Query(ctx, `select `+sealedFlowRows.columns+`
		from flows where pii_key_id <> $1 order by id limit $2`, keyID, limit))
}

// Reseal stores a flow's personal data sealed again under keyID, unless it
// is no longer sealed under f.KeyID.
func Reseal(ctx context.Context, db DB, f SealedFlow, keyID string, nationalID, nationalIDHMAC, lastName []byte) error {
	_, err := db.Exec(ctx, `update flows set pii_key_id = $4, national_id_sealed = $5, national_id_hmac = $6,
		last_name_sealed = $7 where organization_id = $1 and id = $2 and pii_key_id = $3`,
		f.OrganizationID, f.ID, f.KeyID, keyID, nationalID, nationalIDHMAC, lastName)
	return err
}

var sealedKeyRows = newTable[SealedKey]()

// SealedKey is the sealed consent link of one idempotency key.
type SealedKey struct {
	OrganizationID string `db:"organization_id"`
	Key            string `db:"key"`
	FlowID         string `db:"flow_id"`
	KeyID          string `db:"pii_key_id"`
	ConsentSealed  []byte `db:"consent_sealed"`
}

// StaleKeys returns up to limit idempotency keys whose consent link is
// sealed under a key other than keyID.
func StaleKeys(ctx context.Context, db DB, keyID string, limit int) ([]SealedKey, error) {
	return sealedKeyRows.all(db.Query(ctx, `select `+sealedKeyRows.columns+`
		from flow_idempotency_keys where pii_key_id <> $1 and consent_sealed is not null
		order by organization_id, key limit $2`, keyID, limit))
}

// ResealKey stores an idempotency key's consent link sealed again under
// keyID, unless it is no longer sealed under k.KeyID.
func ResealKey(ctx context.Context, db DB, k SealedKey, keyID string, consent []byte) error {
	_, err := db.Exec(ctx, `update flow_idempotency_keys set pii_key_id = $4, consent_sealed = $5
		where organization_id = $1 and key = $2 and pii_key_id = $3`, k.OrganizationID, k.Key, k.KeyID, keyID, consent)
	return err
}
