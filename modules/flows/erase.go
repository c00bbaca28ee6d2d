package flows

import (
	"context"
	"errors"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// Erased is what erasing a person removed from one organization.
type Erased struct {
	// Deletions are the entries of the deletion log, one per flow.
	Deletions []Deletion
	// Receipts are the consent receipts the flows had, with their bodies,
	// read before they went: the erasure keeps them when asked to.
	Receipts []Attachment
}

// EraseSubjectTx deletes in tx every flow of organizationID whose national
// id is nationalID's person's (compared in their canonical forms), each as
// Delete deletes one: the deletion log names by, and each sends its
// flow.deleted. Flows are found through the person's subject key, which it
// holds locked until tx ends (DestroySubjectKeyTx destroys it), so that no
// flow sealed under it commits meanwhile; flows not yet under a subject key
// are found by their keyed hash, or by their blind index, so a flow created
// with the id spelt otherwise is found once "flowd flows reindex" has
// indexed it. A key or index made under a form that may name two people
// (nationalid.Format.LegacyForms) only finds candidates, each confirmed by
// its canonical form.
func (m *Manager) EraseSubjectTx(ctx context.Context, tx database.Tx, organizationID, nationalID, by string) (Erased, error) {
	want, err := m.CanonicalNationalID(nationalID)
	if err != nil || organizationID == "" {
		return Erased{}, nil //nolint:nilerr // a number of no valid form names no flow: nothing to erase
	}
	legacy := m.cfg.NationalIDs.LegacyForms(want)
	var indexes [][]byte
	if m.cfg.PersonIndex != nil {
		for _, form := range append([]string{want}, legacy...) {
			indexes = append(indexes, m.cfg.PersonIndex.Of(form))
		}
	}
	// The flows are read by a statement after the one that locks the keys:
	// it sees the flows of a create that held a key until it committed.
	keyIDs, err := store.LockSubjectKeys(ctx, tx, organizationID, subjectkey.Subjects(m.sealer, organizationID, want))
	if err != nil {
		return Erased{}, err
	}
	shared, err := store.LockSubjectKeys(ctx, tx, organizationID, legacySubjects(m.sealer, organizationID, legacy))
	if err != nil {
		return Erased{}, err
	}
	own := map[string]bool{}
	for _, id := range keyIDs {
		own[id] = true
	}
	hashes := append(m.sealer.Hashes("nationalId", nationalID), m.sealer.Hashes("nationalId", want)...)
	rows, err := store.LockFlowsOfSubject(ctx, tx, organizationID, append(keyIDs, shared...), hashes, indexes)
	if err != nil {
		return Erased{}, err
	}
	var out Erased
	for _, row := range rows {
		if row.SubjectKeyID == nil || !own[*row.SubjectKeyID] {
			of, err := m.isOf(row, want)
			if err != nil {
				return Erased{}, err
			}
			if !of {
				continue
			}
		}
		if err := m.eraseLockedTx(ctx, tx, row, by, &out); err != nil {
			return Erased{}, err
		}
	}
	return out, nil
}

// eraseScanPage is how many flows EraseMatchingTx reads at a time.
const eraseScanPage = 500

// EraseMatchingTx deletes in tx, as EraseSubjectTx does, every flow of
// organizationID for whose national id match returns a non-empty key, and
// returns what it removed by that key. match is given the id's canonical
// form, then the forms flowd may have hashed its person under before
// (nationalid.Format.LegacyForms). It reads every flow of the
// organization, so that one pass serves any number of people: a restore's
// re-erasure, where only keyed hashes of the people are known.
func (m *Manager) EraseMatchingTx(ctx context.Context, tx database.Tx, organizationID, by string, match func(forms []string) string) (map[string]Erased, error) {
	out := map[string]Erased{}
	after := ""
	for {
		page, err := store.OrganizationFlowsAfter(ctx, tx, organizationID, after, eraseScanPage)
		if err != nil {
			return nil, err
		}
		for _, f := range page {
			opened, err := m.toFlow(f)
			if errors.Is(err, errSubjectKeyDestroyed) {
				continue // erased already: nothing of it opens
			}
			if err != nil {
				return nil, err
			}
			key := match(append([]string{opened.Person}, m.cfg.NationalIDs.LegacyForms(opened.Person)...))
			if key == "" {
				continue
			}
			row, err := store.GetFlow(ctx, tx, organizationID, f.ID, true)
			if err != nil {
				return nil, err
			}
			e := out[key]
			if err := m.eraseLockedTx(ctx, tx, row, by, &e); err != nil {
				return nil, err
			}
			out[key] = e
		}
		if len(page) < eraseScanPage {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// eraseLockedTx keeps row's receipts in out and deletes it.
func (m *Manager) eraseLockedTx(ctx context.Context, tx database.Tx, row store.Flow, by string, out *Erased) error {
	receipts, err := store.Attachments(ctx, tx, row.OrganizationID, row.ID, true)
	if err != nil {
		return err
	}
	for _, r := range receipts {
		if r.Kind == KindConsentReceipt {
			out.Receipts = append(out.Receipts, toAttachment(r))
		}
	}
	d, err := m.deleteLockedTx(ctx, tx, row, by)
	if err != nil {
		return err
	}
	out.Deletions = append(out.Deletions, toDeletion(d))
	return nil
}

// isOf reports whether row is a flow of the person whose national id's
// canonical form is want.
func (m *Manager) isOf(row store.Flow, want string) (bool, error) {
	f, err := m.toFlow(row)
	if err != nil {
		return false, err
	}
	return samePerson(f.Person, want), nil
}

// legacySubjects are the subjects in organizationID, under each data key of
// dataKeys, of the legacy forms of a person's national id.
func legacySubjects(dataKeys *pii.Sealer, organizationID string, forms []string) [][]byte {
	var out [][]byte
	for _, form := range forms {
		out = append(out, subjectkey.Subjects(dataKeys, organizationID, form)...)
	}
	return out
}
