// Package webhooks delivers a flow's events to its organization's webhook URL:
// stored in the transaction of the change that causes them (an outbox on a
// River job queue), signed by the Standard Webhooks scheme, retried with
// backoff for at least 24 hours, every attempt recorded.
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/database"
)

// EventType names what happened: to a flow (flow.*), or to one of the
// organization's webhook endpoints (endpoint.*).
type EventType string

const (
	FlowCreated   EventType = "flow.created"
	FlowOpened    EventType = "flow.opened"
	FlowAccepted  EventType = "flow.accepted"
	FlowRejected  EventType = "flow.rejected"
	FlowCancelled EventType = "flow.cancelled"
	FlowDeleted   EventType = "flow.deleted"
	FlowWithdrawn EventType = "flow.withdrawn"
	FlowExpired   EventType = "flow.expired"
	// FlowUsed: the organization recorded a use of an accepted consent. It
	// goes to the endpoints that take it, not to the flow's webhookUrl: a
	// busy ledger would flood the URL that follows the consent's answers.
	FlowUsed EventType = "flow.used"
	// FlowExpiring: an acceptance's validity ends within the notice
	// (FLOWD_CONSENT_EXPIRING_NOTICE), so that the organization can ask again.
	FlowExpiring EventType = "flow.expiring"
	// EndpointDisabled: flowd disabled an endpoint whose deliveries kept
	// failing. It goes to the organization's other endpoints, not to any
	// flow's webhookUrl, and has no flow and no sequence.
	EndpointDisabled EventType = "endpoint.disabled"
	// SubjectErased: the organization erased a person. SubjectErasureRequested:
	// a person asked the organization, from their own page, to erase them.
	// Both go to the organization's endpoints that take them, name the
	// person by their receipt subject alone, and have no flow and no sequence.
	SubjectErased           EventType = "subject.erased"
	SubjectErasureRequested EventType = "subject.erasure_requested"
)

// EventTypes lists every event type: a flow's in the order a flow meets
// them, then an endpoint's.
var EventTypes = []EventType{FlowCreated, FlowOpened, FlowAccepted, FlowRejected, FlowCancelled, FlowDeleted, FlowWithdrawn, FlowExpired,
	FlowUsed, FlowExpiring, EndpointDisabled, SubjectErased, SubjectErasureRequested}

// Valid reports whether t is one of EventTypes.
func (t EventType) Valid() bool {
	for _, v := range EventTypes {
		if t == v {
			return true
		}
	}
	return false
}

// ofFlow reports whether t is a flow's event type, one PublishTx takes.
func (t EventType) ofFlow() bool { return t.Valid() && strings.HasPrefix(string(t), "flow.") }

// Errors the service returns.
var (
	// ErrNotFound: no such task, event or organization secret (or another organization's).
	ErrNotFound = errors.New("webhooks: not found")
	// ErrInvalidEvent: PublishTx was given an event it cannot deliver (a programming error of the caller).
	ErrInvalidEvent = errors.New("webhooks: invalid event")
)

// Event is one thing to tell an organization. It carries no personal data:
// no national id, no last name.
type Event struct {
	Type           EventType
	FlowID         string
	ReferenceID    string
	OrganizationID string
	Status         string // consent status: Unopened, Opened, Rejected, Accepted, Withdrawn, Expired
	FlowStatus     string // process status: active, completed, cancelled
	Version        int
	// Sequence numbers the flow's events from 1, so that a receiver can put
	// them in order whatever order they arrive in.
	Sequence int
	// FlowDefinitionID is the consent definition the flow pinned, and
	// FlowDefinitionVersion its version. The version and WithdrawnBy are
	// not in the receivers' body: they tell flowd's Shared Signals which
	// data holders hear of a consent's end, and who ended it.
	FlowDefinitionID      string
	FlowDefinitionVersion int
	WithdrawnBy           string // "individual" or "organization"; empty unless withdrawn
	URL                   string // the flow's webhookUrl; empty when it has none
	// TaskID is the flow's send-initiate-webhook task for this delivery; empty
	// when the flow no longer exists (flow.deleted).
	TaskID     string
	OccurredAt time.Time
	// Use is the use a flow.used event records; nil for every other type.
	Use *Use
}

// Use is a recorded use of a consent as its flow.used event carries it:
// nothing personal. Its action and reference are free text that may be
// about the person, and events outlive an erasure: they stay out, and the
// API's list of the flow's uses gives them.
type Use struct {
	ID             string
	DataCategories []string
	UsedAt         time.Time
	// Resource is the data holder's resource of a consent token's use
	// (a URI, nothing personal); empty for other uses.
	Resource string
}

// Validate reports ErrInvalidEvent, wrapped with the reason, unless the event
// names a flow's event type, a flow, an organization and an absolute http(s) URL.
func (ev Event) Validate() error {
	switch {
	case !ev.Type.ofFlow():
		return fmt.Errorf("%w: %q is not a flow's event type", ErrInvalidEvent, ev.Type)
	case ev.FlowID == "" || ev.OrganizationID == "":
		return fmt.Errorf("%w: flow and organization ids are required", ErrInvalidEvent)
	case ev.Sequence < 1:
		return fmt.Errorf("%w: the sequence starts at 1", ErrInvalidEvent)
	case ev.URL == "":
		return nil
	}
	u, err := url.Parse(ev.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: the URL must be absolute http(s)", ErrInvalidEvent)
	}
	return nil
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
	// PublishTx stores ev, and its delivery to ev.URL when it has one, when tx
	// commits; nothing is kept or sent if tx rolls back. An invalid event is
	// ErrInvalidEvent.
	PublishTx(ctx context.Context, tx database.Tx, ev Event) error
	// CancelPendingTx drops the undelivered events of an organization's
	// flow (its deletion), when tx commits.
	CancelPendingTx(ctx context.Context, tx database.Tx, organizationID, flowID string) error
}

// TaskReporter is told how a flow's send-initiate-webhook task is going; the
// flows module implements it (it owns tasks and incidents). A task is named
// by its organization and id: the delivery knows both, and the flows
// module's statements all name the organization.
type TaskReporter interface {
	// TaskSucceeded marks the task done and resolves its open incident, if any.
	TaskSucceeded(ctx context.Context, organizationID, taskID string) error
	// TaskFailing records a failed attempt that will be retried: it opens an
	// incident naming message, once, when the first attempts fail. The
	// webhooks module calls it for every failed attempt from the third on
	// (IncidentAfter), so it must open at most one incident per task; it may
	// update the open incident's message.
	TaskFailing(ctx context.Context, organizationID, taskID, message string) error
	// TaskFailed marks the task failed for good (retries exhausted or 410 Gone).
	TaskFailed(ctx context.Context, organizationID, taskID, message string) error
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
	// RotateSecret makes a new signing secret; the previous one keeps signing
	// for SigningOverlap. before runs in the rotation's transaction with the new secret
	// (see database.BeforeCommit); its error keeps the old secret and is
	// returned. ErrNotFound when the organization has no secret (unknown).
	RotateSecret(ctx context.Context, organizationID string, before ...database.BeforeCommit[Secret]) (Secret, error)
	// CurrentSecret returns the secret that signs now. ErrNotFound.
	CurrentSecret(ctx context.Context, organizationID string) (Secret, error)
	// PublicKeys returns the organization's ed25519 public keys that sign
	// v1a signatures now, current first; an organization without a key
	// pair gets one.
	PublicKeys(ctx context.Context, organizationID string) ([]PublicKey, error)
	// RotateSigningKey makes a new key pair; the previous one keeps signing
	// for SigningOverlap. before runs in the rotation's transaction with
	// the keys published afterwards (see database.BeforeCommit).
	RotateSigningKey(ctx context.Context, organizationID string, before ...database.BeforeCommit[[]PublicKey]) ([]PublicKey, error)
	// SendTestEvent sends one endpoint a test event of a type (empty:
	// DefaultTestEventType) with made-up data, recorded as a test and sent
	// nowhere else. ErrEndpointNotFound, ErrEndpointDisabled, apperr
	// Invalid naming "eventType".
	SendTestEvent(ctx context.Context, organizationID, endpointID string, t EventType, before ...database.BeforeCommit[TestEvent]) (TestEvent, error)
	// Attempts lists the delivery attempts of a flow's events, newest first
	// (at most 200).
	Attempts(ctx context.Context, organizationID, flowID string) ([]Attempt, error)
	// Backlog returns the organization's deliveries not delivered: counts,
	// and the latest that failed at least once (at most BacklogShown).
	Backlog(ctx context.Context, organizationID string) (Backlog, error)
	// RetryDelivery sends one of the organization's deliveries again now.
	// before runs in the retry's transaction (see database.BeforeCommit).
	// ErrNotFound, and Redeliver's errors for a delivery to an endpoint.
	RetryDelivery(ctx context.Context, organizationID, id string, before ...database.BeforeCommit[BacklogDelivery]) error
	// TaskEvents names the event each of a flow's delivery tasks delivers,
	// by task id, so that a flow's several delivery tasks can be told apart.
	TaskEvents(ctx context.Context, organizationID, flowID string) (map[string]EventType, error)
	// RetryTask re-sends the event of a flow's failing task at once. before
	// runs in the retry's transaction with the type of the event sent again
	// (see database.BeforeCommit); its error cancels the retry and is
	// returned. ErrNotFound for an unknown task, another organization's, or a
	// deleted flow's.
	RetryTask(ctx context.Context, organizationID, taskID string, before ...database.BeforeCommit[EventType]) error
	// Events lists an organization's events, newest first. Bad parameters
	// are apperr Invalid errors naming the API's query parameters.
	Events(ctx context.Context, organizationID string, q EventQuery) (EventPage, error)
	// Event returns one of an organization's events with its deliveries
	// and their attempts. ErrNotFound.
	Event(ctx context.Context, organizationID, id string) (EventRecord, []Delivery, error)
	// Redeliver sends an event again now, to every destination it had or
	// to one endpoint, and returns how many deliveries are on their way.
	// before runs in the redelivery's transaction with what it sent (see
	// database.BeforeCommit). ErrNotFound, ErrEndpointNotFound,
	// ErrNothingToRedeliver.
	Redeliver(ctx context.Context, organizationID, eventID, endpointID string, before ...database.BeforeCommit[Redelivery]) (int, error)
	// Recover sends the endpoint every event of its types since since that
	// it has not received, in the background, and returns the recovery,
	// queued: those whose delivery to it failed, and those published while
	// it was disabled (from its creation on), each once. requestedBy names
	// who asked ("client:<id>", "staff:<username>"). before runs in the
	// request's transaction with the recovery. apperr Invalid naming
	// "since" (missing, in the future, or beyond Reach),
	// ErrEndpointNotFound, ErrEndpointDisabled, ErrRecoveryRunning (one is
	// queued or running for the endpoint).
	Recover(ctx context.Context, organizationID, endpointID string, since time.Time, requestedBy string,
		before ...database.BeforeCommit[Recovery]) (Recovery, error)
	// Recovery returns one of an endpoint's recoveries, with its progress.
	// ErrRecoveryNotFound, also when the endpoint is unknown.
	Recovery(ctx context.Context, organizationID, endpointID, id string) (Recovery, error)
	// Recoveries lists an endpoint's latest recoveries, newest first (at
	// most RecoveriesShown). ErrEndpointNotFound.
	Recoveries(ctx context.Context, organizationID, endpointID string) ([]Recovery, error)
	// MissedSince returns the since from which a recovery of the disabled
	// endpoint e, once enabled, covers every event it missed: when it was
	// disabled; or, when it was failing, when its deliveries began to fail
	// less the retry schedule, as the deliveries under way then failed
	// later. It is never older than what flowd keeps (Reach), and clamped
	// says when that cut it short.
	MissedSince(e Endpoint, now time.Time) (since time.Time, clamped bool)
	// RecoverFlowURLs sends every delivery to a flow's own webhook URL
	// that failed since since again, to host's URLs only unless host is
	// empty, in the background, and returns the recovery, queued, as
	// Recover does. apperr Invalid naming "since" or "host" (see
	// NormalizeHost), ErrRecoveryRunning (one of the flows' URLs is queued
	// or running).
	RecoverFlowURLs(ctx context.Context, organizationID string, since time.Time, host, requestedBy string,
		before ...database.BeforeCommit[Recovery]) (Recovery, error)
	// FlowURLRecovery returns one recovery of the flows' own URLs.
	// ErrRecoveryNotFound.
	FlowURLRecovery(ctx context.Context, organizationID, id string) (Recovery, error)
	// FlowURLRecoveries lists the latest recoveries of the flows' own URLs,
	// newest first (at most RecoveriesShown).
	FlowURLRecoveries(ctx context.Context, organizationID string) ([]Recovery, error)
}

// Redelivery is what Redeliver sent again: one event, to every
// destination it had or to one endpoint.
type Redelivery struct {
	EventID    string
	Type       EventType
	FlowID     string
	EndpointID string // empty: every destination
	Deliveries int    // how many are on their way
}
