// Package flows is the heart of flowd: a flow is the consent process run for
// one individual on behalf of one organization. This module owns flows, their
// tasks and incidents and the deletion log; the consent
// module owns consent links, the webhooks module owns delivery.
package flows

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/modules/webhooks"
)

// ConsentStatus is the individual's answer so far (the API's consent.status).
type ConsentStatus string

const (
	Unopened ConsentStatus = "Unopened"
	Opened   ConsentStatus = "Opened"
	Rejected ConsentStatus = "Rejected"
	Accepted ConsentStatus = "Accepted"
	// Withdrawn is an acceptance the person withdrew, or the organization on
	// their behalf.
	Withdrawn ConsentStatus = "Withdrawn"
	// Expired is an acceptance whose validity (Evidence.ValidUntil) ended.
	Expired ConsentStatus = "Expired"
)

// Who withdrew an acceptance.
const (
	ByIndividual   = "individual"   // the person, on the consent link
	ByOrganization = "organization" // the organization, through the API or console
)

// ProcessStatus is where the flow's process stands. A flow is archived once
// its process is no longer active.
type ProcessStatus string

const (
	Active    ProcessStatus = "active"
	Completed ProcessStatus = "completed" // Accepted or Rejected
	Cancelled ProcessStatus = "cancelled" // cancelled or expired
)

// Task types and categories of a flow's tasks.
const (
	TaskConsent             = "consent"               // the individual's user task
	TaskSendInitiateWebhook = "send-initiate-webhook" // a service task per webhook delivery
	CategoryUserTask        = "user-task"
	CategoryServiceTask     = "service-task"
	CategoryIncident        = "incident"
)

// Task statuses.
const (
	TaskPending   = "pending"
	TaskCompleted = "completed"
	TaskFailed    = "failed"
	TaskCancelled = "cancelled"
)

// Flow is one consent process.
type Flow struct {
	ID             string
	OrganizationID string
	Number         int64
	ReferenceID    string
	ReferenceName  string // empty when not set
	Version        int
	ConsentStatus  ConsentStatus
	ProcessStatus  ProcessStatus
	Sandbox        bool
	NationalID     string // as the organization wrote it (a Swedish 10-digit number: its canonical form)
	// Person is the canonical form of NationalID (nationalid.Format), by
	// which flowd tells people apart: every comparison, hash and index of
	// the person is of it.
	Person             string
	LastName           string
	RedirectURL        string
	WebhookURL         string
	OrganizationNumber string
	ProcessInstanceID  string
	// The consent definition version the flow pinned at create.
	FlowDefinitionID      string
	FlowDefinitionVersion int
	VersionTag            string // empty when the version has none
	// Parameters value the pinned version's parameters; nil when it
	// declares none.
	Parameters     map[string]string
	Evidence       Evidence
	CreatedAt      time.Time
	UpdatedAt      time.Time
	OpenedAt       *time.Time
	DecidedAt      *time.Time
	WithdrawnAt    *time.Time
	WithdrawnBy    string     // ByIndividual or ByOrganization; empty unless withdrawn
	ExpiredAt      *time.Time // when the acceptance expired
	ExpiresAt      time.Time
	HasErrors      bool
	NumAttachments int        // its consent receipts
	NumUses        int        // the uses the organization recorded of the consent
	LastUsedAt     *time.Time // the latest use's usedAt; nil before the first
	// ExpiringNotifiedAt is when flow.expiring went out for the acceptance;
	// nil until it did (see Expiring).
	ExpiringNotifiedAt *time.Time
	Incidents          []Incident // open incidents only
	ConsentURL         string     // the end user's link, from the consent module
}

// Archived reports whether the flow's process is over.
func (f Flow) Archived() bool { return f.ProcessStatus != Active }

// Expiring reports whether the flow is an acceptance whose validity ends
// soon: flow.expiring went out for it (FLOWD_CONSENT_EXPIRING_NOTICE before
// its Evidence.ValidUntil), and it is still accepted.
func (f Flow) Expiring() bool { return f.ConsentStatus == Accepted && f.ExpiringNotifiedAt != nil }

// ETag is the flow's entity tag. Its version names every state the API
// shows: each change of the flow (its consent, process, incidents, errors
// and receipts) grows it in the change's transaction.
func (f Flow) ETag() string { return etag.Version(f.Version) }

// ProcessDefinitionID names the definition version the flow runs: "<id>:<version>".
func (f Flow) ProcessDefinitionID() string {
	return f.FlowDefinitionID + ":" + strconv.Itoa(f.FlowDefinitionVersion)
}

// Evidence is what a decision recorded of the consent given: the text the
// person saw and how sure the eID was of them. It is empty before the
// decision.
type Evidence struct {
	TextSHA256     []byte // of the pinned version's canonical text
	Language       string // the language the text was shown in: "en" or "nb"
	AssuranceLevel string // low, substantial or high; empty when proof is turned off
	ACR            string // the eID's acr claim
	ValidUntil     *time.Time
}

// Incident is an open problem of one of the flow's tasks.
type Incident struct {
	ID       string
	TaskID   string
	TaskType string
	Message  string
	OpenedAt time.Time
}

// Task is a step of the flow's process.
type Task struct {
	ID           string
	FlowID       string
	TaskType     string
	TaskCategory string
	Status       string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// NewFlow is what an API client asks for.
type NewFlow struct {
	NationalID    string
	LastName      string
	RedirectURL   string
	WebhookURL    string
	ReferenceName string
	// FlowDefinitionID names the consent definition; empty is the
	// organization's default. FlowDefinitionVersion 0 is its latest version.
	FlowDefinitionID      string
	FlowDefinitionVersion int
	// Parameters value each parameter the definition version declares, and
	// no other.
	Parameters map[string]string
}

// Caller is who acts on flows: always one organization.
type Caller struct {
	OrganizationID string
	ClientID       string // API client id, or "staff:<username>" from the console
	Sandbox        bool
}

// Created is the result of a create.
type Created struct {
	FlowID      string
	ReferenceID string
	ConsentURL  string
}

// ListParams selects a page of flows, newest first. At most one of
// StartingAfter and EndingBefore is set.
type ListParams struct {
	Limit         int // 1–100, default 10
	Archived      bool
	Status        ConsentStatus // empty: any
	Sandbox       *bool         // nil: any
	ReferenceID   string        // exact match; empty: any
	StartingAfter string
	EndingBefore  string
	// WithIncidents fills in each flow's open incidents (one more query), for
	// the console's incident badge; the API list does without.
	WithIncidents bool
}

// Page is one page of flows.
type Page struct {
	Flows   []FlowSummary
	HasMore bool
}

// FlowSummary is a flow as lists show it. Lists read only these columns
// and open only the national id, which makes a page much cheaper than one
// of whole flows. Get a flow for the rest.
type FlowSummary struct {
	ID             string
	OrganizationID string
	Number         int64
	ReferenceID    string
	ReferenceName  string // empty when not set
	ConsentStatus  ConsentStatus
	ProcessStatus  ProcessStatus
	Sandbox        bool
	// FlowDefinitionID is the consent definition the flow pinned.
	FlowDefinitionID string
	NationalID       string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	Incidents        []Incident // open incidents, with ListParams.WithIncidents
}

// Archived reports whether the flow's process is over.
func (f FlowSummary) Archived() bool { return f.ProcessStatus != Active }

// Deletion is an entry of the deletion log; it keeps nothing personal.
type Deletion struct {
	FlowID      string
	ReferenceID string
	DeletedBy   string
	// ReceiptIDs are the ids of the consent receipts deleted with the flow,
	// so that a receipt presented later can be told apart from a forgery.
	ReceiptIDs []string
	DeletedAt  time.Time
}

// Attachment is a document of a flow: a consent receipt.
type Attachment struct {
	ID          string
	FlowID      string
	Kind        string // KindConsentReceipt
	ContentType string
	Body        string // empty in lists
	CreatedAt   time.Time
}

// KindConsentReceipt is the kind of a consent receipt: a compact JWS that
// flowd signed, of content type application/jwt.
const KindConsentReceipt = "consent-receipt"

// Decisions a receipt records.
const (
	DecisionAccepted  = "accepted"
	DecisionRejected  = "rejected"
	DecisionWithdrawn = "withdrawn"
)

// SignedReceipt is a receipt as the consent module signed it: its id (the
// JWS's jti) and the JWS, which flows keeps as the flow's attachment.
type SignedReceipt struct {
	ID  string
	JWS string
}

// Locked is a flow read and locked for a decision or a withdrawal, with what
// the consent module needs to decide and sign: the flow with its open
// incidents (its consent link is the consent module's own), and the id of
// its latest receipt, which a withdrawal's receipt names.
type Locked struct {
	Flow Flow
	// LastReceiptID is empty when the flow has no receipt (it was accepted
	// before receipts existed, or is undecided).
	LastReceiptID string
}

// Decision is the person's final answer as the consent module decided it:
// what flows records on the flow, with the signed receipt.
type Decision struct {
	OrganizationID string
	FlowID         string
	Accepted       bool
	At             time.Time // when it was decided: the receipt's iat and the flow's decidedAt
	Evidence       Evidence
}

// Withdrawal is an acceptance's withdrawal as the consent module decided it.
type Withdrawal struct {
	OrganizationID string
	FlowID         string
	By             string    // ByIndividual or ByOrganization
	At             time.Time // when it was withdrawn: the receipt's iat and the flow's withdrawnAt
}

// Use is one use an organization made of an accepted consent, as it
// recorded it in the flow's ledger. It holds nothing personal.
type Use struct {
	ID             string
	FlowID         string
	Action         string   // what the organization did, e.g. "fetched income 2025"
	DataCategories []string // of the flow's definition version; empty when not given
	Reference      string   // the organization's own reference; empty when not given
	UsedAt         time.Time
	RecordedAt     time.Time
	RecordedBy     string // the API client, or "staff:<username>"
	// Resource is the data holder's resource a consent token was issued
	// for (Action ActionConsentToken); empty for other uses.
	Resource string
}

// ActionConsentToken is the action of the use each consent token is: the
// token service records it as it issues the token.
const ActionConsentToken = "consent-token"

// NewUse is a use an API client records.
type NewUse struct {
	Action         string
	UsedAt         *time.Time // nil: now
	DataCategories []string
	Reference      string
	// Resource names the resource of a consent token's use; the API's
	// uses have none.
	Resource string
	// Check, when set, is asked of the flow as RecordUse read it, before
	// anything is recorded, so that what the caller checks or signs is the
	// very state the use is counted against. Its error is RecordUse's.
	Check func(Flow) error
}

// Limits of a recorded use.
const (
	MaxUseAction    = 200
	MaxUseReference = 200
	// MaxUseClockSkew is how far in the future a use's usedAt may be, for
	// clocks that run ahead of flowd's.
	MaxUseClockSkew = 5 * time.Minute
)

// UseParams select a page of a flow's uses, latest first (usedAt, then id,
// descending). At most one of StartingAfter and EndingBefore is set.
type UseParams struct {
	Limit         int // 1–100, default 10
	StartingAfter string
	EndingBefore  string
}

// UsePage is one page of a flow's uses.
type UsePage struct {
	Uses    []Use
	HasMore bool
}

// Errors the service returns besides *apperr.Error values of code Invalid.
var (
	// ErrConsentNotInForce: a use can be recorded only of a consent that is
	// accepted and inside its validity.
	ErrConsentNotInForce = errors.New("flow's consent is not in force")
	ErrNotFound          = errors.New("flow not found") // unknown, deleted or another organization's
	ErrNotActive         = errors.New("flow is not active")
	// ErrNotAccepted: only an accepted consent can be withdrawn.
	ErrNotAccepted = errors.New("flow's consent is not accepted")
)

// Service is what the flows module offers the web layer and the CLI. Every
// method is scoped to the caller's organization: another organization's flow
// is ErrNotFound.
type Service interface {
	// Create validates in and creates the flow, its consent request, its tasks
	// and its flow.created event in one transaction; before runs in it with
	// what was created (see database.BeforeCommit: the API keeps its answer
	// to an Idempotency-Key so), and its error rolls the create back and is
	// returned. Bad input is one apperr Invalid error naming every field by
	// its API name (nationalId, lastName, redirectUrl, webhookUrl,
	// referenceName).
	Create(ctx context.Context, c Caller, in NewFlow, before ...database.BeforeCommit[Created]) (Created, error)
	// Get returns one flow with its open incidents and consent link. ErrNotFound.
	Get(ctx context.Context, c Caller, flowID string) (Flow, error)
	// List returns a page of flows as lists show them. Bad parameters are
	// apperr Invalid errors.
	List(ctx context.Context, c Caller, p ListParams) (Page, error)
	// Tasks lists a flow's tasks, oldest first. ErrNotFound.
	Tasks(ctx context.Context, c Caller, flowID string) ([]Task, error)
	// Cancel ends an active flow's process; its consent link stops working.
	// cond is checked against the flow's ETag under the cancel's lock: when
	// it does not hold, the cancel is an apperr PreconditionFailed error and
	// changes nothing (Delete takes it alike). before runs in the
	// cancel's transaction with the cancelled flow (see
	// database.BeforeCommit); its error leaves the flow active and is
	// returned. ErrNotFound, ErrNotActive.
	Cancel(ctx context.Context, c Caller, flowID string, cond etag.IfMatch, before ...database.BeforeCommit[Flow]) (Flow, error)
	// Delete removes the flow and everything personal for good and logs the
	// deletion. before runs in the delete's transaction with the deletion
	// (see database.BeforeCommit); its error leaves the flow as it was and is
	// returned. ErrNotFound, apperr PreconditionFailed.
	Delete(ctx context.Context, c Caller, flowID string, cond etag.IfMatch, before ...database.BeforeCommit[Deletion]) (Deletion, error)
	// Deletions lists the organization's deletion log, newest first.
	Deletions(ctx context.Context, organizationID string, limit int, before string) ([]Deletion, bool, error)
	// Attachments lists a flow's attachments, oldest first, without their
	// bodies. ErrNotFound.
	Attachments(ctx context.Context, c Caller, flowID string) ([]Attachment, error)
	// Attachment returns one of a flow's attachments with its body. ErrNotFound.
	Attachment(ctx context.Context, c Caller, flowID, attachmentID string) (Attachment, error)
	// RecordUse records a use of the flow's consent, counts it on the flow
	// and publishes flow.used, in one transaction. before runs in that
	// transaction with the use (see database.BeforeCommit). When the consent
	// is not accepted, or its validity has ended, nothing is recorded but
	// refused, which runs in a transaction of its own that commits, with the
	// flow as it is; the error is ErrConsentNotInForce. Bad input is one
	// apperr Invalid error naming action, usedAt, dataCategories[i] and
	// reference. ErrNotFound.
	RecordUse(ctx context.Context, c Caller, flowID string, in NewUse, refused database.BeforeCommit[Flow], before ...database.BeforeCommit[Use]) (Use, error)
	// Uses returns a page of the flow's uses, latest first. Bad parameters
	// are apperr Invalid errors naming the API's query parameters.
	// ErrNotFound.
	Uses(ctx context.Context, c Caller, flowID string, p UseParams) (UsePage, error)
	// CanonicalNationalID returns the canonical form of nationalID in the
	// configured format, read now: the one form of every spelling of the
	// person's number, in which flowd compares, hashes and indexes people.
	// A *nationalid.Error says why it is no number of the format.
	CanonicalNationalID(nationalID string) (string, error)
}

// ConsentRequests is what flows needs of the consent module: a link for each
// flow, made and removed inside flows' transactions.
type ConsentRequests interface {
	// CreateTx makes the consent request of a new flow and returns its link.
	CreateTx(ctx context.Context, tx database.Tx, organizationID, flowID string) (consentURL string, err error)
	// QueueURL adds the read of a flow's consent link to read, which flows
	// sends in one round trip with its own read of the flow, and returns the
	// function that gives the link once read is done: ErrUnknownLink of the
	// consent module when the flow has no request.
	QueueURL(read database.SharedRead, organizationID, flowID string) func() (string, error)
	// DeleteTx removes a flow's consent request; its link stops working.
	DeleteTx(ctx context.Context, tx database.Tx, organizationID, flowID string) error
}

// Definitions is what flows needs of the consent module: the consent
// definition version a new flow pins.
type Definitions interface {
	// PinTx returns the version a new flow of organizationID runs: version n
	// of definition id (the organization's default when id is empty; its
	// latest version when n is 0), with its declared parameters. The
	// definition cannot be retired until tx
	// ends. An unknown definition or version is an apperr Invalid error
	// naming flowDefinitionId or flowDefinitionVersion, a retired one an
	// apperr Conflict.
	PinTx(ctx context.Context, tx database.Tx, organizationID, id string, n int) (PinnedDefinition, error)
	// DataCategories returns the data categories of version n of
	// organizationID's definition id: each category's names, one per
	// language. A version never changes, so it need not be read in the
	// transaction that records a use of it.
	DataCategories(ctx context.Context, organizationID, id string, n int) ([][]string, error)
}

// PinnedDefinition is the definition version a flow runs.
type PinnedDefinition struct {
	ID      string
	Version int
	Tag     string // empty when the version has none
	// Parameters are the names of the version's declared parameters, which
	// a new flow must value, each and no other.
	Parameters []string
}

// Organizations is what flows needs of the identity module.
type Organizations interface {
	// FlowSettings returns the settings new flows of an organization take.
	FlowSettings(ctx context.Context, organizationID string) (OrganizationSettings, error)
}

// OrganizationSettings are an organization's settings that shape its flows.
type OrganizationSettings struct {
	ReferencePrefix    string
	OrganizationNumber string
	RedirectOrigins    []string // allowed redirectUrl origins; empty allows any
}

// Events is what flows needs of the webhooks module: each change's event
// stored in the change's own transaction.
type Events interface {
	// PublishTx stores ev for delivery when tx commits.
	PublishTx(ctx context.Context, tx database.Tx, ev webhooks.Event) error
	// CancelPendingTx drops the undelivered events of an organization's
	// deleted flow when tx commits.
	CancelPendingTx(ctx context.Context, tx database.Tx, organizationID, flowID string) error
}
