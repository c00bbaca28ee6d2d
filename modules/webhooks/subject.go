package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/payload"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// subjectEvent is the body of a subject.* event: its data is the
// publisher's, and names the person by their receipt subject alone.
type subjectEvent struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

// PublishSubjectTx stores an event about a person (subject.*) of
// organizationID in tx and fans it out to the organization's endpoints
// that take it. data must carry nothing personal but the receipt subject.
// ErrInvalidEvent for a type that is not a subject's.
func (m *Module) PublishSubjectTx(ctx context.Context, tx database.Tx, organizationID string, typ EventType, at time.Time, data any) error {
	if !typ.Valid() || !strings.HasPrefix(string(typ), "subject.") || organizationID == "" {
		return fmt.Errorf("%w: %q is not a subject's event type", ErrInvalidEvent, typ)
	}
	b, err := json.Marshal(subjectEvent{Type: string(typ), Timestamp: payload.Time(at), Data: data})
	if err != nil {
		return err
	}
	ev := store.StoredEvent{ID: uuid.Must(uuid.NewV7()).String(), OrganizationID: organizationID, Type: string(typ), Body: string(b)}
	targets, err := store.InsertEvent(ctx, tx, ev, nil)
	if err != nil {
		return fmt.Errorf("webhooks: store event: %w", database.Classify(err))
	}
	if len(targets) == 0 {
		return nil
	}
	return m.fanOutTx(ctx, tx, ev, targets)
}
