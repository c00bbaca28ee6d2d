package flows

import (
	"context"
	"crypto/subtle"
	"errors"

	"github.com/flowd/flowd/modules/flows/internal/store"
)

// MaxFlowsOfPerson bounds the flows the person's own page lists.
const MaxFlowsOfPerson = 500

// ErrNoPersonIndex means the flows module was made without a Config.PersonIndex.
var ErrNoPersonIndex = errors.New("flows: no person index key")

// CanonicalNationalID returns the canonical form of nationalID in the
// module's format, read now: the form in which flowd compares, hashes and
// indexes people, one per person. A *nationalid.Error says why nationalID
// is not a number of the format; its message never repeats the id.
func (m *Manager) CanonicalNationalID(nationalID string) (string, error) {
	return m.cfg.NationalIDs.Canonical(nationalID)
}

// samePerson reports, in constant time, whether two canonical forms are
// one person's.
func samePerson(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// FlowsOfPerson returns the flows addressed to nationalID in every
// organization, newest first, found by their blind index: it is the only
// read of flows across organizations, and serves only the person's own
// page, for the person signed in. Each flow's sealed national id is opened
// and compared too, in its canonical form, so that only the person's own
// flows are returned. A national id that is no number of the format has
// none.
func (m *Manager) FlowsOfPerson(ctx context.Context, nationalID string) ([]Flow, error) {
	if m.cfg.PersonIndex == nil {
		return nil, ErrNoPersonIndex
	}
	want, err := m.CanonicalNationalID(nationalID)
	if err != nil {
		return nil, nil //nolint:nilerr // a number of no valid form names no flow
	}
	rows, err := store.FlowsOfPerson(ctx, m.pool, m.cfg.PersonIndex.Of(want), m.cfg.PersonIndex.Version(), MaxFlowsOfPerson)
	if err != nil {
		return nil, err
	}
	out := make([]Flow, 0, len(rows))
	for _, r := range rows {
		f, err := m.toFlow(r)
		if err != nil {
			return nil, err
		}
		if samePerson(f.Person, want) {
			out = append(out, f)
		}
	}
	return out, nil
}
