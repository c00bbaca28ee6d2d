package e2e

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/pii"
)

// The seal contexts of flowd's sealed columns, as the flows module binds
// them: a flow's personal data to the flow, a subject key to its row.
func flowContext(flowID, field string) []string { return []string{"flow:", flowID, ":", field} }

func subjectKeyContext(organizationID, id string) []string {
	return []string{"subject-key:", organizationID, ":", id, ":", "key"}
}

// sealedFlow is what a database holds of a flow's personal data, as
// sealed, and the subject key it names.
type sealedFlow struct {
	organizationID, id, piiKeyID string
	subjectKeyID                 *string
	nationalID, lastName         []byte
}

// readSealed reads the sealed personal data of the flows ids from the
// database at dbURL, failing unless each is there.
func readSealed(t *testing.T, dbURL string, ids ...string) []sealedFlow {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	out := make([]sealedFlow, len(ids))
	for i, id := range ids {
		f := &out[i]
		if err := conn.QueryRow(ctx, `select organization_id, id::text, pii_key_id, subject_key_id::text,
			national_id_sealed, last_name_sealed from flows where id = $1`, id).Scan(&f.organizationID, &f.id, &f.piiKeyID,
			&f.subjectKeyID, &f.nationalID, &f.lastName); err != nil {
			t.Fatalf("flow %s: %v", id, err)
		}
	}
	return out
}

// dataKeys is the data key the test instances run with.
func dataKeys(t *testing.T) *pii.Sealer {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(flowdtest.TestDataKey)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pii.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// remainingKeys are the keys the database at dbURL holds that open
// anything: the data key, and every subject key it still keeps, which the
// data key opens.
func remainingKeys(t *testing.T, dbURL string) []*pii.Sealer {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	data := dataKeys(t)
	rows, err := conn.Query(ctx, `select organization_id, id::text, pii_key_id, key_sealed from subject_keys where key_sealed is not null`)
	if err != nil {
		t.Fatal(err)
	}
	type sealedKey struct {
		organizationID, id, dataKeyID string
		sealed                        []byte
	}
	sealed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sealedKey, error) {
		var k sealedKey
		return k, r.Scan(&k.organizationID, &k.id, &k.dataKeyID, &k.sealed)
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := []*pii.Sealer{data}
	for _, k := range sealed {
		raw, err := data.Open(k.dataKeyID, k.sealed, subjectKeyContext(k.organizationID, k.id)...)
		if err != nil {
			t.Fatalf("subject key %s does not open with the data key: %v", k.id, err)
		}
		key, err := pii.New([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	return keys
}

// opens reports whether any of keys opens f's national id or last name.
func (f sealedFlow) opens(keys []*pii.Sealer) bool {
	for _, k := range keys {
		for _, keyID := range []string{k.KeyID(), f.piiKeyID} {
			if _, err := k.Open(keyID, f.nationalID, flowContext(f.id, "nationalId")...); err == nil {
				return true
			}
			if _, err := k.Open(keyID, f.lastName, flowContext(f.id, "lastName")...); err == nil {
				return true
			}
		}
	}
	return false
}

// checkShredded fails t unless the sealed flows, each under a subject key,
// open with none of the keys the database at dbURL holds.
func checkShredded(t *testing.T, where, dbURL string, flows []sealedFlow) {
	t.Helper()
	keys := remainingKeys(t, dbURL)
	for _, f := range flows {
		if f.subjectKeyID == nil {
			t.Errorf("%s: flow %s is sealed under no subject key", where, f.id)
		}
		if f.opens(keys) {
			t.Errorf("%s: the erased flow %s's sealed personal data opens with the %d keys that remain", where, f.id, len(keys))
		}
	}
}
