// Package subjectkey makes and opens subject keys: the data key of one
// person within one organization, under which their flows' personal data
// is sealed, itself sealed by the data key (FLOWD_DATA_KEY), which acts as
// its key encryption key. Destroying a subject key leaves nothing sealed
// under it that opens: not the rows not yet deleted, nor those of a backup
// taken before.
package subjectkey

import (
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/ids"
	"github.com/flowd/flowd/modules/flows/internal/store"
)

// ErrDestroyed is what opening a key that has been destroyed returns.
var ErrDestroyed = errors.New("its person's key is destroyed")

// Key is a subject key, opened: a Sealer whose only key is it.
type Key struct {
	ID     string
	Sealer *pii.Sealer
}

// Domain is the domain of a person's subject (the hash that finds their
// key) within organizationID: the same person has unrelated subjects in
// two organizations.
func Domain(organizationID string) string { return "subject:" + organizationID }

// sealContext binds a sealed subject key, and what the key's row seals
// under it, to the row.
func sealContext(organizationID, id, field string) []string {
	return []string{"subject-key:", organizationID, ":", id, ":", field}
}

// Subjects are the subjects in organizationID, under each data key of
// dataKeys, the current first, of the person whose national id has the
// canonical form person (nationalid.Format.Canonical).
func Subjects(dataKeys *pii.Sealer, organizationID, person string) [][]byte {
	return dataKeys.Hashes(Domain(organizationID), person)
}

// New makes a new key for the person of the canonical national id person
// in organizationID: the key opened, and the row that would keep it,
// sealed under dataKeys' current key, with the person's blind index under
// index (nil: none).
func New(dataKeys *pii.Sealer, index *nationalid.BlindIndex, organizationID, person string) (Key, store.SubjectKey, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Key{}, store.SubjectKey{}, err
	}
	made, err := pii.New(raw)
	if err != nil {
		return Key{}, store.SubjectKey{}, err
	}
	id := ids.New()
	row := store.SubjectKey{OrganizationID: organizationID, ID: id, KeyID: dataKeys.KeyID(),
		Subject:          dataKeys.Hash(Domain(organizationID), person),
		KeySealed:        dataKeys.Seal(string(raw), sealContext(organizationID, id, "key")...),
		NationalIDSealed: made.Seal(person, sealContext(organizationID, id, "nationalId")...)}
	if index != nil {
		version := index.Version()
		row.PersonIndex, row.PersonIndexKey = index.Of(person), &version
	}
	return Key{ID: id, Sealer: made}, row, nil
}

// Open opens the key id of organizationID, sealed under the data key
// dataKeyID of dataKeys; ErrDestroyed when sealed is nil. It returns the
// key's raw bytes too, for sealing it again.
func Open(dataKeys *pii.Sealer, organizationID, id, dataKeyID string, sealed []byte) (Key, string, error) {
	if sealed == nil {
		return Key{}, "", ErrDestroyed
	}
	raw, err := dataKeys.Open(dataKeyID, sealed, sealContext(organizationID, id, "key")...)
	if err != nil {
		return Key{}, "", fmt.Errorf("subject key %s (key %s): %w", id, dataKeyID, err)
	}
	s, err := pii.New([]byte(raw))
	if err != nil {
		return Key{}, "", fmt.Errorf("subject key %s: %w", id, err)
	}
	return Key{ID: id, Sealer: s}, raw, nil
}

// OpenToRead opens the key id of organizationID as Open does, for reading
// alone, under whichever data key of dataKeys sealed it: its Opener
// derives a third of what a Key's Sealer does.
func OpenToRead(dataKeys *pii.Sealer, organizationID, id string, sealed []byte) (*pii.Opener, error) {
	if sealed == nil {
		return nil, ErrDestroyed
	}
	raw, err := dataKeys.OpenUnderAny(sealed, sealContext(organizationID, id, "key")...)
	if err != nil {
		return nil, fmt.Errorf("subject key %s: %w", id, err)
	}
	o, err := pii.NewOpener([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("subject key %s: %w", id, err)
	}
	return o, nil
}

// Sealing opens the key id of organizationID as Open does, under whichever
// data key of dataKeys sealed it, to seal under it: what the free text of
// a use of one of its flows is sealed with. ErrDestroyed when sealed is nil.
func Sealing(dataKeys *pii.Sealer, organizationID, id string, sealed []byte) (Key, error) {
	if sealed == nil {
		return Key{}, ErrDestroyed
	}
	raw, err := dataKeys.OpenUnderAny(sealed, sealContext(organizationID, id, "key")...)
	if err != nil {
		return Key{}, fmt.Errorf("subject key %s: %w", id, err)
	}
	s, err := pii.New([]byte(raw))
	if err != nil {
		return Key{}, fmt.Errorf("subject key %s: %w", id, err)
	}
	return Key{ID: id, Sealer: s}, nil
}

// SealUse seals the free text of the use useID under k: its action, and
// its reference unless empty (nil then).
func (k Key) SealUse(useID, action, reference string) (actionSealed, referenceSealed []byte) {
	actionSealed = k.Sealer.Seal(action, store.UseContext(useID, "action")...)
	if reference != "" {
		referenceSealed = k.Sealer.Seal(reference, store.UseContext(useID, "reference")...)
	}
	return actionSealed, referenceSealed
}

// OpenRow opens a key's row with dataKeys.
func OpenRow(dataKeys *pii.Sealer, row store.SubjectKey) (Key, string, error) {
	return Open(dataKeys, row.OrganizationID, row.ID, row.KeyID, row.KeySealed)
}

// Reseal is row's key sealed again under dataKeys' current key, and the
// person's subject hashed again under it, for a rotation of the data key.
func Reseal(dataKeys *pii.Sealer, row store.SubjectKey) (subject, sealed []byte, err error) {
	key, raw, err := OpenRow(dataKeys, row)
	if err != nil {
		return nil, nil, err
	}
	nationalID, err := NationalID(key, row)
	if err != nil {
		return nil, nil, err
	}
	return dataKeys.Hash(Domain(row.OrganizationID), nationalID),
		dataKeys.Seal(raw, sealContext(row.OrganizationID, row.ID, "key")...), nil
}

// NationalID opens the national id a key's row keeps under key: its
// canonical form, or for a key made before flowd had canonical forms, the
// form it compared ids in then (nationalid.Legacy).
func NationalID(key Key, row store.SubjectKey) (string, error) {
	id, err := key.Sealer.Open(key.Sealer.KeyID(), row.NationalIDSealed, sealContext(row.OrganizationID, row.ID, "nationalId")...)
	if err != nil {
		return "", fmt.Errorf("subject key %s: national id: %w", row.ID, err)
	}
	return id, nil
}

// Sealed is a flow's personal data sealed under its subject key.
type Sealed struct {
	NationalID, NationalIDHMAC, LastName []byte
}

// SealFlow seals the personal data of the flow flowID under k. The lookup
// hash of the national id is keyed by k too: once k is destroyed, nothing
// left on the row tells whose it was, even to whom holds the data key.
func (k Key) SealFlow(flowID, nationalID, lastName string) Sealed {
	return Sealed{NationalID: k.Sealer.Seal(nationalID, store.SealContext(flowID, "nationalId")...),
		NationalIDHMAC: k.Sealer.Hash("nationalId", nationalID),
		LastName:       k.Sealer.Seal(lastName, store.SealContext(flowID, "lastName")...)}
}
