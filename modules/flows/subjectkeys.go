package flows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// A person's personal data in an organization is sealed under a data key of
// their own there, their subject key (see package subjectkey). A flow's
// reads take the key's sealed bytes in the statement that reads the flow,
// so a destroyed key is seen at once, by every instance.

// errSubjectKeyDestroyed is what opening a flow whose person's key has been
// destroyed returns: the flow is as good as deleted.
var errSubjectKeyDestroyed = fmt.Errorf("%w: %w", ErrNotFound, subjectkey.ErrDestroyed)

// DestroySubjectKeyTx destroys, in tx, the key that the personal data of
// the person nationalID in organizationID is sealed under: once tx
// commits, none of their flows there opens (they read as ErrNotFound), on
// any instance, nor do the rows of a backup taken before, and the person's
// next flow gets a new key. Their flows in other organizations are
// untouched. found is false, and nothing changes, when the person has no
// live key there; flows not yet rekeyed ("flowd flows rekey") have none. A
// key made under a form of the id that may name two people
// (nationalid.Format.LegacyForms) is destroyed once no flow is sealed under
// it any more: EraseSubjectTx erased the person's, and another person's
// keep it.
func (m *Manager) DestroySubjectKeyTx(ctx context.Context, tx database.Tx, organizationID, nationalID string) (time.Time, bool, error) {
	person, err := m.CanonicalNationalID(nationalID)
	if organizationID == "" || err != nil {
		return time.Time{}, false, nil //nolint:nilerr // a number of no valid form has no key to destroy
	}
	destroyed, err := store.DestroySubjectKeys(ctx, tx, organizationID, subjectkey.Subjects(m.sealer, organizationID, person))
	if err != nil {
		return time.Time{}, false, err
	}
	if legacy := legacySubjects(m.sealer, organizationID, m.cfg.NationalIDs.LegacyForms(person)); len(legacy) > 0 {
		emptied, err := store.DestroyEmptySubjectKeys(ctx, tx, organizationID, legacy)
		if err != nil {
			return time.Time{}, false, err
		}
		destroyed = append(destroyed, emptied...)
	}
	if len(destroyed) == 0 {
		return time.Time{}, false, nil
	}
	for _, k := range destroyed {
		m.keys.forgetID(k.ID)
	}
	return *destroyed[0].DestroyedAt, true, nil
}

// rowOpener returns what opens the personal data of a flow's row: its
// subject key, which the row's statement read (sealed), or the data key
// piiKeyID for a row not yet under one. errSubjectKeyDestroyed when the
// row's subject key is destroyed.
func (m *Manager) rowOpener(organizationID, piiKeyID string, keyID *string, sealed []byte) (opener, error) {
	if keyID == nil {
		return sealerOpener(m.sealer, piiKeyID), nil
	}
	if sealed == nil {
		m.keys.forgetID(*keyID)
		return nil, errSubjectKeyDestroyed
	}
	o, ok := m.keys.byID(*keyID)
	if !ok {
		var err error
		if o, err = subjectkey.OpenToRead(m.sealer, organizationID, *keyID, sealed); err != nil {
			return nil, err
		}
		m.keys.putOpener(*keyID, o)
	}
	return o.Open, nil
}

// insertUnderSubjectKey seals row's personal data, in, under the subject
// key of its person and inserts it with tasks in tx, in one round trip
// when this instance holds the person's key or the person has none yet.
// Otherwise (the person's key is not the one it held, or a concurrent
// create made theirs first) it finds the person's key, seals under it and
// inserts again. It returns the key and keep, which remembers it for the
// person's next create once tx has committed.
func (m *Manager) insertUnderSubjectKey(ctx context.Context, tx pgx.Tx, row *store.Flow, in NewFlow, prefix string, tasks []*store.Task) (subjectkey.Key, func(), error) {
	canonical, _ := m.cfg.NationalIDs.OfKept(in.NationalID, time.Now())
	subjects := subjectkey.Subjects(m.sealer, row.OrganizationID, canonical)
	person := row.OrganizationID + "\x00" + string(subjects[0])
	key, held := m.keys.bySubject(person)
	var made store.SubjectKey // the row of a new key, inserted with the flow
	if !held {
		var err error
		if key, made, err = subjectkey.New(m.sealer, m.cfg.PersonIndex, row.OrganizationID, canonical); err != nil {
			return subjectkey.Key{}, nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		sealed := key.SealFlow(row.ID, in.NationalID, in.LastName)
		row.PIIKeyID, row.SubjectKeyID = store.SubjectSealed, &key.ID
		row.NationalIDSealed, row.NationalIDHMAC, row.LastNameSealed = sealed.NationalID, sealed.NationalIDHMAC, sealed.LastName
		err := store.InsertNumberedFlow(ctx, tx, row, made, subjects, prefix, m.cfg.ConsentTTL, tasks...)
		if !errors.Is(err, store.ErrSubjectKeyMissing) {
			if err != nil {
				return subjectkey.Key{}, nil, err
			}
			return key, func() { m.keys.put(person, key) }, nil
		}
		if attempt == 2 {
			return subjectkey.Key{}, nil, fmt.Errorf("flows: no subject key of the person held: %w", err)
		}
		m.keys.forgetPerson(person)
		if key, err = m.findOrMakeSubjectKey(ctx, tx, row.OrganizationID, canonical, subjects); err != nil {
			return subjectkey.Key{}, nil, err
		}
		made = store.SubjectKey{} // the key is stored now: the insert only confirms it
	}
}

// findOrMakeSubjectKey returns the live key of the person of the canonical
// national id person in organizationID, made and stored in tx when they
// have none. A concurrent insert of the person's key that wins leaves this
// one nothing to find in its snapshot; asked again, it finds the winner's.
func (m *Manager) findOrMakeSubjectKey(ctx context.Context, tx pgx.Tx, organizationID, person string, subjects [][]byte) (subjectkey.Key, error) {
	made, row, err := subjectkey.New(m.sealer, m.cfg.PersonIndex, organizationID, person)
	if err != nil {
		return subjectkey.Key{}, err
	}
	var stored store.SubjectKey
	for range 3 {
		if stored, err = store.FindOrInsertSubjectKey(ctx, tx, row, subjects); !errors.Is(err, database.ErrNotFound) {
			break
		}
	}
	if err != nil {
		return subjectkey.Key{}, fmt.Errorf("flows: subject key: %w", err)
	}
	if stored.ID == made.ID {
		return made, nil
	}
	key, _, err := subjectkey.OpenRow(m.sealer, stored)
	return key, err
}
