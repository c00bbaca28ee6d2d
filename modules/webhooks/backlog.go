package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// Backlog is what an organization's staff see of its deliveries not
// delivered: how many are pending (Retrying of them failed at least once),
// how many failed for good, since when the oldest pending one waits, and
// the latest deliveries that failed at least once.
type Backlog struct {
	Pending, Retrying, Failed int
	OldestPending             *time.Time
	Deliveries                []BacklogDelivery
}

// BacklogDelivery is a delivery that failed at least once.
type BacklogDelivery struct {
	ID         string
	EventID    string
	FlowID     string
	TaskID     string // the flow's delivery task, for a delivery to its webhookUrl
	EndpointID string // the endpoint, for a delivery to one; empty otherwise
	Type       EventType
	URL        string
	State      string // pending (to be retried) or failed (given up)
	LastError  string
	Attempts   int
	CreatedAt  time.Time
	// Test marks the delivery of a test event (SendTestEvent).
	Test bool
}

// BacklogShown bounds Backlog's list of deliveries.
const BacklogShown = 100

// Backlog returns the organization's deliveries not delivered.
func (m *Module) Backlog(ctx context.Context, organizationID string) (Backlog, error) {
	c, rows, err := store.DeliveryBacklog(ctx, m.pool, organizationID, BacklogShown)
	if err != nil {
		return Backlog{}, fmt.Errorf("webhooks: backlog: %w", database.Classify(err))
	}
	b := Backlog{Pending: c.Pending, Retrying: c.Retrying, Failed: c.Failed, OldestPending: c.OldestPending}
	for _, r := range rows {
		b.Deliveries = append(b.Deliveries, backlogDelivery(r))
	}
	return b, nil
}

func backlogDelivery(r store.BacklogRow) BacklogDelivery {
	return BacklogDelivery{ID: r.ID, EventID: r.EventID, FlowID: r.FlowID, TaskID: r.TaskID, EndpointID: r.EndpointID,
		Type: EventType(r.Type), URL: r.URL, State: r.State, LastError: r.LastError, Attempts: r.Attempts, CreatedAt: r.CreatedAt,
		Test: r.Test}
}

// RetryDelivery sends one of the organization's deliveries again now: a
// delivery to a flow's webhookUrl as RetryTask does, one to an endpoint as
// Redeliver does to that endpoint. before runs in the retry's transaction
// with the delivery. ErrNotFound for another organization's or an unknown
// delivery.
func (m *Module) RetryDelivery(ctx context.Context, organizationID, id string, before ...database.BeforeCommit[BacklogDelivery]) error {
	r, err := store.GetBacklogRow(ctx, m.pool, organizationID, id)
	if errors.Is(err, database.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("webhooks: retry delivery: %w", database.Classify(err))
	}
	d := backlogDelivery(r)
	if d.EndpointID != "" {
		_, err = m.Redeliver(ctx, organizationID, d.EventID, d.EndpointID, func(ctx context.Context, tx database.Tx, _ Redelivery) error {
			return database.RunBeforeCommit(ctx, tx, d, before)
		})
		return err
	}
	return m.RetryTask(ctx, organizationID, d.TaskID, func(ctx context.Context, tx database.Tx, _ EventType) error {
		return database.RunBeforeCommit(ctx, tx, d, before)
	})
}
