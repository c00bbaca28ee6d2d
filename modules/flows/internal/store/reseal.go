package store

import "context"

// SealedFlow is the personal data of one flow row, as sealed under KeyID.
type SealedFlow struct {
	ID               string
	KeyID            string
	NationalIDSealed []byte
	LastNameSealed   []byte
}

// StaleFlows locks up to limit flows whose personal data is sealed under a
// key other than keyID, skipping rows other transactions hold, so that
// several re-sealers (or a re-sealer and live traffic) never wait on each other.
func StaleFlows(ctx context.Context, db DB, keyID string, limit int) ([]SealedFlow, error) {
	rows, err := db.Query(ctx, `select id::text, pii_key_id, national_id_sealed, last_name_sealed
		from flows where pii_key_id <> $1 order by id limit $2 for update skip locked`, keyID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SealedFlow
	for rows.Next() {
		var f SealedFlow
		if err := rows.Scan(&f.ID, &f.KeyID, &f.NationalIDSealed, &f.LastNameSealed); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Reseal stores a flow's personal data sealed again under keyID.
func Reseal(ctx context.Context, db DB, id, keyID string, nationalID, nationalIDHMAC, lastName []byte) error {
	_, err := db.Exec(ctx, `update flows set pii_key_id = $2, national_id_sealed = $3, national_id_hmac = $4,
		last_name_sealed = $5 where id = $1`, id, keyID, nationalID, nationalIDHMAC, lastName)
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

// StaleKeys locks up to limit idempotency keys whose consent link is sealed
// under a key other than keyID.
func StaleKeys(ctx context.Context, db DB, keyID string, limit int) ([]SealedKey, error) {
	rows, err := db.Query(ctx, `select organization_id, key, flow_id::text, pii_key_id, consent_sealed
		from flow_idempotency_keys where pii_key_id <> $1 and consent_sealed is not null
		order by organization_id, key limit $2 for update skip locked`, keyID, limit)
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

// ResealKey stores an idempotency key's consent link sealed again under keyID.
func ResealKey(ctx context.Context, db DB, organizationID, key, keyID string, consent []byte) error {
	_, err := db.Exec(ctx, `update flow_idempotency_keys set pii_key_id = $3, consent_sealed = $4
		where organization_id = $1 and key = $2`, organizationID, key, keyID, consent)
	return err
}
