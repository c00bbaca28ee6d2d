package ssf

import (
	"context"
	"time"

	"github.com/flowd/flowd/modules/ssf/internal/store"
)

// StreamHealth is a stream as an operator sees it: its status and reason,
// and what it holds undelivered.
type StreamHealth struct {
	Stream
	// Pending counts the SETs not yet acknowledged or rejected;
	// OldestPending is when the oldest of them was put on the stream
	// (zero when none).
	Pending       int
	OldestPending time.Time
}

// Health says how an organization's streams fare.
type Health interface {
	// StreamHealth returns the organization's streams, oldest first, each
	// with its backlog.
	StreamHealth(ctx context.Context, organizationID string) ([]StreamHealth, error)
}

var _ Health = (*Module)(nil)

// StreamHealth implements Health.
func (m *Module) StreamHealth(ctx context.Context, organizationID string) ([]StreamHealth, error) {
	streams, err := m.ListStreams(ctx, organizationID)
	if err != nil {
		return nil, err
	}
	backlogs, err := store.Backlogs(ctx, m.pool, organizationID)
	if err != nil {
		return nil, err
	}
	byStream := make(map[string]store.Backlog, len(backlogs))
	for _, b := range backlogs {
		byStream[b.StreamID] = b
	}
	out := make([]StreamHealth, len(streams))
	for i, s := range streams {
		b := byStream[s.ID]
		out[i] = StreamHealth{Stream: s, Pending: b.Pending, OldestPending: b.Oldest.UTC()}
		if b.Pending == 0 {
			out[i].OldestPending = time.Time{}
		}
	}
	return out, nil
}
