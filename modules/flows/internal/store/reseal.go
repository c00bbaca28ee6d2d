package store

import "context"

// Key rotation reads the stale rows of every organization without locking
// them, since a statement over every organization's rows cannot lock them
// on Citus, and writes each back only while it is still sealed under the
// key it was read with: a row another re-sealer got to first is left alone.
// Personal data never changes otherwise, so nothing else can be lost.

// SealedFlow is the personal data of one flow row, as sealed under KeyID.
type SealedFlow struct {
	OrganizationID   string
	ID               string
	KeyID            string
	NationalIDSealed []byte
	LastNameSealed   []byte
}

// StaleFlows returns up to limit flows whose personal data is sealed under
// a key other than keyID.
func StaleFlows(ctx context.Context, db DB, keyID string, limit int) ([]SealedFlow, error) {
	rows, err := db.Query(ctx, `select organization_id, id::text, pii_key_id, national_id_sealed, last_name_sealed
		from flows where pii_key_id <> $1 order by id limit $2`, keyID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SealedFlow
	for rows.Next() {
		var f SealedFlow
		if err := rows.Scan(&f.OrganizationID, &f.ID, &f.KeyID, &f.NationalIDSealed, &f.LastNameSealed); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Reseal stores a flow's personal data sealed again under keyID, unless it
// is no longer sealed under f.KeyID.
func Reseal(ctx context.Context, db DB, f SealedFlow, keyID string, nationalID, nationalIDHMAC, lastName []byte) error {
	_, err := db.Exec(ctx, `update flows set pii_key_id = $4, national_id_sealed = $5, national_id_hmac = $6,
		last_name_sealed = $7 where organization_id = $1 and id = $2 and pii_key_id = $3`,
		f.OrganizationID, f.ID, f.KeyID, keyID, nationalID, nationalIDHMAC, lastName)
	return err
}

// SealedKey is the sealed consent link of one idempotency key.
type SealedKey struct {
	OrganizationID string
	Key            string
	FlowID         string
	KeyID          string
	ConsentSealed  []byte
}

// StaleKeys returns up to limit idempotency keys whose consent link is
// sealed under a key other than keyID.
func StaleKeys(ctx context.Context, db DB, keyID string, limit int) ([]SealedKey, error) {
	rows, err := db.Query(ctx, `select organization_id, key, flow_id::text, pii_key_id, consent_sealed
		from flow_idempotency_keys where pii_key_id <> $1 and consent_sealed is not null
		order by organization_id, key limit $2`, keyID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SealedKey
	for rows.Next() {
		var k SealedKey
		if err := rows.Scan(&k.OrganizationID, &k.Key, &k.FlowID, &k.KeyID, &k.ConsentSealed); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// ResealKey stores an idempotency key's consent link sealed again under
// keyID, unless it is no longer sealed under k.KeyID.
func ResealKey(ctx context.Context, db DB, k SealedKey, keyID string, consent []byte) error {
	_, err := db.Exec(ctx, `update flow_idempotency_keys set pii_key_id = $4, consent_sealed = $5
		where organization_id = $1 and key = $2 and pii_key_id = $3`, k.OrganizationID, k.Key, k.KeyID, keyID, consent)
	return err
}
