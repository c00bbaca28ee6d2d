package webhooks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/delivery"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// EventRecord is a stored event: what happened to a flow or an endpoint,
// kept for the event retention whether or not a webhook received it.
type EventRecord struct {
	ID        string // the webhook-id of its deliveries
	FlowID    string // empty for an event of no flow (endpoint.disabled)
	Sequence  int    // 0 for an event of no flow
	Type      EventType
	Data      json.RawMessage // the data object every delivery carries
	CreatedAt time.Time
	// Test marks a test event: sent to one endpoint to try it (SendTestEvent).
	Test bool
}

// Delivery is an event's delivery to one URL, with its attempts.
type Delivery struct {
	ID         string
	URL        string
	State      string // pending, delivered, failed or cancelled
	LastError  string
	CreatedAt  time.Time
	FinishedAt *time.Time
	Attempts   []Attempt // oldest first
}

// EventQuery selects a page of an organization's events, newest first. At
// most one of StartingAfter and EndingBefore is set.
type EventQuery struct {
	Limit         int       // 1–100, default 10
	Type          EventType // empty: any
	FlowID        string    // empty: any
	CreatedAfter  time.Time // zero: no bound; inclusive
	CreatedBefore time.Time // zero: no bound; exclusive
	StartingAfter string
	EndingBefore  string
}

// EventPage is one page of events.
type EventPage struct {
	Events  []EventRecord
	HasMore bool
}

// Limits of the events API.
const (
	DefaultEventLimit = 10
	MaxEventLimit     = 100
)

// DefaultEventRetention keeps events for the events API for 30 days.
const DefaultEventRetention = 30 * 24 * time.Hour

// Check validates q and fills in its default limit; errors name the query
// parameters of the API.
func (q *EventQuery) Check() error {
	var f apperr.Fields
	if q.Limit == 0 {
		q.Limit = DefaultEventLimit
	} else if q.Limit < 1 || q.Limit > MaxEventLimit {
		f.Add("limit", "must be from 1 to %d", MaxEventLimit)
	}
	if q.Type != "" && !q.Type.Valid() {
		f.Add("type", "must be one of the event types, such as flow.accepted")
	}
	if q.FlowID != "" && !isUUID(q.FlowID) {
		f.Add("flowId", "must be a flow id")
	}
	if q.StartingAfter != "" && q.EndingBefore != "" {
		f.Add("ending_before", "cannot be combined with starting_after")
	}
	if q.StartingAfter != "" && !isUUID(q.StartingAfter) {
		f.Add("starting_after", "must be an event id")
	}
	if q.EndingBefore != "" && !isUUID(q.EndingBefore) {
		f.Add("ending_before", "must be an event id")
	}
	if !q.CreatedAfter.IsZero() && !q.CreatedBefore.IsZero() && !q.CreatedAfter.Before(q.CreatedBefore) {
		f.Add("createdBefore", "must be later than createdAfter")
	}
	return f.Err()
}

func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// Events lists an organization's events, newest first.
func (m *Module) Events(ctx context.Context, organizationID string, q EventQuery) (EventPage, error) {
	if err := q.Check(); err != nil {
		return EventPage{}, err
	}
	sq := store.EventQuery{OrganizationID: organizationID, Type: string(q.Type), FlowID: q.FlowID,
		CreatedAfter: q.CreatedAfter, CreatedBefore: q.CreatedBefore, Limit: q.Limit}
	cursorParam := "starting_after"
	switch {
	case q.StartingAfter != "":
		sq.Cursor = q.StartingAfter
	case q.EndingBefore != "":
		sq.Cursor, sq.Backwards, cursorParam = q.EndingBefore, true, "ending_before"
	}
	rows, more, err := store.Events(ctx, m.pool, sq)
	if errors.Is(err, database.ErrNotFound) {
		return EventPage{}, apperr.InvalidFields([]apperr.FieldError{{Field: cursorParam, Message: "is not an event of this organization"}})
	}
	if err != nil {
		return EventPage{}, fmt.Errorf("webhooks: events: %w", database.Classify(err))
	}
	page := EventPage{HasMore: more, Events: make([]EventRecord, len(rows))}
	for i, r := range rows {
		if page.Events[i], err = toRecord(r); err != nil {
			return EventPage{}, err
		}
	}
	return page, nil
}

// Event returns one of an organization's events with its deliveries and
// their attempts. ErrNotFound.
func (m *Module) Event(ctx context.Context, organizationID, id string) (EventRecord, []Delivery, error) {
	if !isUUID(id) {
		return EventRecord{}, nil, ErrNotFound
	}
	row, deliveries, err := store.EventWithDeliveries(ctx, m.pool, organizationID, id)
	if errors.Is(err, database.ErrNotFound) {
		return EventRecord{}, nil, ErrNotFound
	}
	if err != nil {
		return EventRecord{}, nil, fmt.Errorf("webhooks: event: %w", database.Classify(err))
	}
	rec, err := toRecord(row)
	if err != nil {
		return EventRecord{}, nil, err
	}
	out := make([]Delivery, len(deliveries))
	for i, d := range deliveries {
		out[i] = Delivery{ID: d.ID, URL: d.URL, State: d.State, LastError: d.LastError, CreatedAt: d.CreatedAt, FinishedAt: d.FinishedAt}
		for _, a := range d.Attempts {
			out[i].Attempts = append(out[i].Attempts, Attempt{EventID: rec.ID, EventType: rec.Type, At: a.At,
				StatusCode: a.StatusCode, Error: a.Error, Latency: a.Latency})
		}
	}
	return rec, out, nil
}

// toRecord reads the data object out of the body every delivery sends.
func toRecord(r store.StoredEvent) (EventRecord, error) {
	var b struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.Body), &b); err != nil {
		return EventRecord{}, fmt.Errorf("webhooks: event %s: %w", r.ID, err)
	}
	return EventRecord{ID: r.ID, FlowID: r.FlowID, Sequence: r.Sequence, Type: EventType(r.Type), Data: b.Data, CreatedAt: r.CreatedAt,
		Test: r.Test}, nil
}

// ErrNothingToRedeliver: the event has no delivery to send again (its flow
// has no webhookUrl and no endpoint wanted it, or its flow was deleted), or
// it is a test event and the endpoint is not the one it was sent to.
var ErrNothingToRedeliver = errors.New("webhooks: the event has no delivery to send again")

// Redeliver sends one of an organization's events again, now: to every
// destination it had, or, with endpointID, to that endpoint only, which
// gets a delivery of its own if it had none (it subscribed later, or was
// disabled then). It returns how many deliveries are on their way.
// ErrNotFound for the event, ErrEndpointNotFound, ErrNothingToRedeliver.
func (m *Module) Redeliver(ctx context.Context, organizationID, eventID, endpointID string, before ...database.BeforeCommit[Redelivery]) (int, error) {
	if !isUUID(eventID) {
		return 0, ErrNotFound
	}
	if endpointID != "" && !isUUID(endpointID) {
		return 0, ErrEndpointNotFound
	}
	n := 0
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		ev, err := store.GetStoredEvent(ctx, tx, organizationID, eventID, true)
		if errors.Is(err, database.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		var target store.Endpoint
		if endpointID != "" {
			if target, err = store.GetEndpoint(ctx, tx, organizationID, endpointID, false); errors.Is(err, database.ErrNotFound) {
				return ErrEndpointNotFound
			} else if err != nil {
				return err
			}
		}
		deliveries, err := store.ResetDeliveries(ctx, tx, organizationID, eventID, endpointID)
		if err != nil {
			return err
		}
		for _, d := range deliveries {
			if err := m.retryJobTx(ctx, tx, d); err != nil {
				return err
			}
		}
		n = len(deliveries)
		if n == 0 && endpointID != "" && !ev.Test {
			// An event has one delivery to an endpoint at most: one
			// cancelled (its flow was deleted) stays so.
			if had, err := store.HasDelivery(ctx, tx, organizationID, eventID, endpointID); err != nil || had {
				return cmp.Or(err, ErrNothingToRedeliver)
			}
			// Added unless a recovery adds it at the same time, which
			// sends it as well.
			n = 1
			ids, jobs, err := m.claimTx(ctx, tx, organizationID, target.ID, target.URL, nil, []store.Missed{{
				DeliveryID: uuid.Must(uuid.NewV7()).String(), EventID: ev.ID, FlowID: ev.FlowID, Type: ev.Type, Body: ev.Body,
			}}, delivery.FirstPriority)
			if err != nil {
				return err
			}
			for i, id := range ids {
				if err := store.SetJob(ctx, tx, organizationID, id, jobs[i]); err != nil {
					return err
				}
			}
		}
		if n == 0 {
			return ErrNothingToRedeliver
		}
		return database.RunBeforeCommit(ctx, tx, Redelivery{EventID: ev.ID, Type: EventType(ev.Type), FlowID: ev.FlowID,
			EndpointID: endpointID, Deliveries: n}, before)
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrEndpointNotFound) && !errors.Is(err, ErrNothingToRedeliver) {
		return 0, fmt.Errorf("webhooks: redeliver: %w", database.Classify(err))
	}
	return n, err
}
