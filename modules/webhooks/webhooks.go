// Package webhooks delivers a flow's events to its organization's webhook URL:
// stored in the transaction of the change that causes them (an outbox on a
// River job queue), signed by the Standard Webhooks scheme, retried with
// backoff for at least 24 hours, every attempt recorded.
package webhooks

import (
	"context"
	"time"

	"github.com/flowd/flowd/internal/database"
)

// EventType names what happened to a flow.
type EventType string

const (
	FlowCreated   EventType = "flow.created"
	FlowOpened    EventType = "flow.opened"
	FlowAccepted  EventType = "flow.accepted"
	FlowRejected  EventType = "flow.rejected"
	FlowCancelled EventType = "flow.cancelled"
	FlowDeleted   EventType = "flow.deleted"
)

// Event is one thing to tell an organization. It carries no personal data:
// no national id, no last name.
type Event struct {
	Type           EventType
	FlowID         string
	ReferenceID    string
	OrganizationID string
	Status         string // consent status: Unopened, Opened, Rejected, Accepted
	FlowStatus     string // process status: active, completed, cancelled
	Version        int
	URL            string // the flow's webhookUrl
	// TaskID is the flow's send-initiate-webhook task for this delivery; empty
	// when the flow no longer exists (flow.deleted).
	TaskID     string
	OccurredAt time.Time
}

// Attempt is one try at delivering an event, kept for the console.
type Attempt struct {
	EventID    string
	EventType  EventType
	At         time.Time
	StatusCode int    // 0 when no response came
	Error      string // empty on success
	Latency    time.Duration
}

// Publisher stores events for delivery. It is what flows calls inside its
// transactions.
type Publisher interface {
	// PublishTx stores ev for delivery when tx commits; nothing is sent if tx rolls back.
	PublishTx(ctx context.Context, tx database.Tx, ev Event) error
	// CancelPendingTx drops the undelivered events of a flow (its deletion), when tx commits.
	CancelPendingTx(ctx context.Context, tx database.Tx, flowID string) error
}

// TaskReporter is told how a flow's send-initiate-webhook task is going; the
// flows module implements it (it owns tasks and incidents).
type TaskReporter interface {
	// TaskSucceeded marks the task done and resolves its open incident, if any.
	TaskSucceeded(ctx context.Context, taskID string) error
	// TaskFailing records a failed attempt that will be retried: it opens an
	// incident naming message, once, when the first attempts fail.
	TaskFailing(ctx context.Context, taskID, message string) error
	// TaskFailed marks the task failed for good (retries exhausted or 410 Gone).
	TaskFailed(ctx context.Context, taskID, message string) error
}

// Secret is an organization's signing secret, "whsec_" and base64.
type Secret struct {
	Value     string
	CreatedAt time.Time
}

// Service is what the webhooks module offers the rest of flowd.
type Service interface {
	Publisher
	// CreateSecretTx makes the first signing secret of a new organization.
	CreateSecretTx(ctx context.Context, tx database.Tx, organizationID string) (Secret, error)
	// RotateSecret makes a new signing secret; the previous one keeps signing for 24 h.
	RotateSecret(ctx context.Context, organizationID string) (Secret, error)
	// CurrentSecret returns the secret that signs now.
	CurrentSecret(ctx context.Context, organizationID string) (Secret, error)
	// Attempts lists the delivery attempts of a flow's events, newest first.
	Attempts(ctx context.Context, organizationID, flowID string) ([]Attempt, error)
	// RetryTask re-sends the event of a flow's failing task at once.
	RetryTask(ctx context.Context, organizationID, taskID string) error
}
