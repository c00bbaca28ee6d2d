package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/delivery"
	"github.com/flowd/flowd/modules/webhooks/internal/payload"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// DefaultTestEventType is the type of a test event that names none.
const DefaultTestEventType = FlowCreated

// TestEvent is a synthetic event sent to one endpoint so that its receiver
// can be tried: stored and listed as a test, delivered, signed and retried
// like any other, never sent anywhere else.
type TestEvent struct {
	EventID    string
	DeliveryID string
	EndpointID string
	Type       EventType
}

// testFlowStates are the consent and process status a test event of a
// flow's type shows, as a real flow's event of that type would.
var testFlowStates = map[EventType][2]string{
	FlowCreated: {"Unopened", "active"}, FlowOpened: {"Opened", "active"},
	FlowAccepted: {"Accepted", "completed"}, FlowRejected: {"Rejected", "completed"},
	FlowCancelled: {"Opened", "cancelled"}, FlowDeleted: {"Accepted", "completed"},
	FlowWithdrawn: {"Withdrawn", "completed"}, FlowExpired: {"Expired", "completed"},
}

// SendTestEvent sends the endpoint a test event of type t (empty:
// DefaultTestEventType) with made-up data: a flow's event names a flow id
// that no flow has. before runs in the transaction that stores it.
// ErrEndpointNotFound, ErrEndpointDisabled, apperr Invalid naming
// "eventType".
func (m *Module) SendTestEvent(ctx context.Context, organizationID, endpointID string, t EventType,
	before ...database.BeforeCommit[TestEvent]) (TestEvent, error) {
	if t == "" {
		t = DefaultTestEventType
	}
	if !t.Valid() {
		return TestEvent{}, apperr.InvalidFields([]apperr.FieldError{{Field: "eventType",
			Message: "is not an event type; known types are " + knownTypes()}})
	}
	if !isUUID(endpointID) {
		return TestEvent{}, ErrEndpointNotFound
	}
	out := TestEvent{EventID: uuid.Must(uuid.NewV7()).String(), DeliveryID: uuid.Must(uuid.NewV7()).String(),
		EndpointID: endpointID, Type: t}
	err := database.WithTx(ctx, m.pool, func(tx database.Tx) error {
		e, err := store.GetEndpoint(ctx, tx, organizationID, endpointID, false)
		if errors.Is(err, database.ErrNotFound) {
			return ErrEndpointNotFound
		}
		if err != nil {
			return err
		}
		if !e.Enabled {
			return ErrEndpointDisabled
		}
		body, err := testBody(t, fromEndpointRow(e), time.Now())
		if err != nil {
			return err
		}
		res, err := m.river.InsertTx(ctx, tx, delivery.Args{OrganizationID: organizationID, EventID: out.DeliveryID},
			&river.InsertOpts{Queue: delivery.Queue, Priority: delivery.FirstPriority})
		if err != nil {
			return err
		}
		if err := store.InsertTestEvent(ctx, tx,
			store.StoredEvent{ID: out.EventID, OrganizationID: organizationID, Type: string(t), Body: string(body)},
			store.Event{ID: out.DeliveryID, URL: e.URL, JobID: res.Job.ID}, endpointID); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil && !errors.Is(err, ErrEndpointNotFound) && !errors.Is(err, ErrEndpointDisabled) {
		return TestEvent{}, fmt.Errorf("webhooks: test event: %w", database.Classify(err))
	}
	if err != nil {
		return TestEvent{}, err
	}
	return out, nil
}

// testBody is the body of a test event of type t to endpoint e at now.
func testBody(t EventType, e Endpoint, now time.Time) ([]byte, error) {
	if t == EndpointDisabled {
		return json.Marshal(payload.Endpoint{Type: string(t), Timestamp: payload.Time(now), Data: payload.EndpointData{
			EndpointID: e.ID, OrganizationID: e.OrganizationID, URL: payload.Origin(e.URL),
			Reason:       "A test event: the endpoint was not disabled.",
			FailingSince: payload.Time(now), DisabledAt: payload.Time(now),
		}})
	}
	switch t {
	case SubjectErased:
		return json.Marshal(subjectEvent{Type: string(t), Timestamp: payload.Time(now), Data: map[string]any{
			"erasureId": uuid.Must(uuid.NewV7()).String(), "organizationId": e.OrganizationID,
			"erasedAt": payload.Time(now), "flowCount": 0,
		}})
	case SubjectErasureRequested:
		return json.Marshal(subjectEvent{Type: string(t), Timestamp: payload.Time(now), Data: map[string]any{
			"requestId": uuid.Must(uuid.NewV7()).String(), "organizationId": e.OrganizationID,
			"subject": "TEST-EVENT", "reference": "TEST-EVENT", "requestedAt": payload.Time(now),
		}})
	}
	states, ok := testFlowStates[t]
	if !ok {
		states = [2]string{"Accepted", "completed"}
	}
	return json.Marshal(payload.Flow{Type: string(t), Timestamp: payload.Time(now), Data: payload.FlowData{
		FlowID: uuid.Must(uuid.NewV7()).String(), ReferenceID: "TEST-EVENT", OrganizationID: e.OrganizationID,
		Status: states[0], FlowStatus: states[1], Version: 1, Sequence: 1,
	}})
}
