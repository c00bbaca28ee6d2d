package ssf

import (
	"context"
	"time"

	"github.com/flowd/flowd/modules/ssf/internal/store"
)

// Notice is what one data holder was told of a consent that ended: the
// proof a person and the organization see.
type Notice struct {
	DataHolderID string
	// DataHolderName is filled in by whoever knows the organizations'
	// names (the composition root); the module leaves it empty.
	DataHolderName string
	SentAt         time.Time
	// Acknowledged is when the data holder's receiver acknowledged the
	// SET (push: its 2xx; poll: ack); nil while it has not. Rejected
	// carries the receiver's err when it refused the SET.
	Acknowledged *time.Time
	Rejected     string
}

// Notices says which data holders were told that a consent ended.
type Notices interface {
	// NoticesOf returns, oldest first, a notice per stream that carried
	// the end of consentID (a flow of organizationID).
	NoticesOf(ctx context.Context, organizationID, consentID string) ([]Notice, error)
}

var _ Notices = (*Module)(nil)

// NoticesOf implements Notices.
func (m *Module) NoticesOf(ctx context.Context, organizationID, consentID string) ([]Notice, error) {
	sets, err := store.OfConsent(ctx, m.pool, organizationID, consentID)
	if err != nil {
		return nil, err
	}
	out := make([]Notice, 0, len(sets))
	for _, s := range sets {
		n := Notice{DataHolderID: s.OrganizationID, SentAt: s.CreatedAt.UTC()}
		switch s.State {
		case "acknowledged":
			n.Acknowledged = s.SettledAt
		case "rejected":
			n.Rejected = s.Err
		}
		out = append(out, n)
	}
	return out, nil
}
