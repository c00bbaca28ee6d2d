package flows

import (
	"context"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// What the tests of flows_test reach of the package's own.

// MakeLegacy puts flows of organizationID back as a flowd from before
// canonical national ids left them: sealed, their ids as spelt (by flow
// id), under one subject key of form, the form flowd compared the ids in
// then, indexed under index with the version oldVersion.
func MakeLegacy(ctx context.Context, m *Manager, index *nationalid.BlindIndex, organizationID, form, oldVersion string, spelt map[string]string) error {
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		key, row, err := subjectkey.New(m.sealer, nil, organizationID, form)
		if err != nil {
			return err
		}
		row.PersonIndex, row.PersonIndexKey = index.Of(form), &oldVersion
		if _, err := store.FindOrInsertSubjectKey(ctx, tx, row, subjectkey.Subjects(m.sealer, organizationID, form)); err != nil {
			return err
		}
		for id, spelling := range spelt {
			r, err := store.GetFlow(ctx, tx, organizationID, id, true)
			if err != nil {
				return err
			}
			f, err := m.toFlow(r)
			if err != nil {
				return err
			}
			sealed := key.SealFlow(id, spelling, f.LastName)
			if err := store.Rehome(ctx, tx, store.Rehomed{Flow: store.SealedFlow{OrganizationID: organizationID, ID: id},
				From: *r.SubjectKeyID, To: key.ID, NationalIDSealed: sealed.NationalID, NationalIDHMAC: sealed.NationalIDHMAC,
				LastName: sealed.LastName}); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `delete from subject_keys k where organization_id = $1 and id = $2
				and not exists (select 1 from flows f where f.organization_id = k.organization_id and f.subject_key_id = k.id)`,
				organizationID, *r.SubjectKeyID); err != nil {
				return err
			}
		}
		return nil
	})
	m.keys = newKeyCache()
	return err
}
