package flows

import (
	"context"
	"crypto/subtle"
	"errors"

	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/nationalid"
)

// MaxFlowsOfPerson bounds the flows the person's own page lists.
const MaxFlowsOfPerson = 500

// ErrNoPersonIndex means the flows module was made without a Config.PersonIndex.
var ErrNoPersonIndex = errors.New("flows: no person index key")

// FlowsOfPerson returns the flows addressed to nationalID in every
// organization, newest first, found by their blind index: it is the only
// read of flows across organizations, and serves only the person's own
// page, for the person signed in. Each flow's sealed national id is opened
// and compared too, so that only the person's own flows are returned.
func (m *Manager) FlowsOfPerson(ctx context.Context, nationalID string) ([]Flow, error) {
	if m.cfg.PersonIndex == nil {
		return nil, ErrNoPersonIndex
	}
	want := nationalid.Normalize(nationalID)
	if want == "" {
		return nil, nil
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
		if subtle.ConstantTimeCompare([]byte(nationalid.Normalize(f.NationalID)), []byte(want)) == 1 {
			out = append(out, f)
		}
	}
	return out, nil
}
