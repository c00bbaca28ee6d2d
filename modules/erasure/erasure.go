// Package erasure is the erasure module: an organization erases a person,
// named by their national id, from everything flowd holds for it. An
// erasure deletes the person's flows as a flow's deletion does, destroys
// the person's data key in the organization, keeps a tombstone (the person
// only by keyed hashes) and hands the organization a signed erasure
// receipt. The tombstones are what "flowd erasures reapply" erases again in
// a database restored from a backup taken before.
package erasure

import (
	"context"
	"errors"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
)

// Erasure is one erasure of a person from an organization: its tombstone
// and its receipt.
type Erasure struct {
	ID             string
	OrganizationID string
	// Subject names the person as the organization's consent receipts do:
	// a keyed hash of the national id under the organization's salt.
	Subject   string
	FlowCount int
	// KeepReceipts: the consent receipts of the erased flows were kept as
	// evidence (KeptReceipts lists them).
	KeepReceipts bool
	// KeyDestroyedAt is when the person's own data key in the organization
	// was destroyed; nil when the person had none there (no flow of theirs
	// was sealed under one).
	KeyDestroyedAt *time.Time
	ErasedBy       string // "client:ID", "staff:USERNAME" or "operator"
	ErasedAt       time.Time
	// Receipt is the erasure receipt, a compact JWS.
	Receipt string
	// KeptReceipts are the consent receipts kept; filled by Get only.
	KeptReceipts []KeptReceipt
	// Replayed is set when the erasure answers a request to erase a person
	// already erased, with nothing left to erase.
	Replayed bool
}

// KeptReceipt is a consent receipt an erasure kept as evidence.
type KeptReceipt struct {
	ID     string
	FlowID string
	JWS    string
}

// Request asks to erase a person.
type Request struct {
	NationalID   string
	KeepReceipts bool
}

// Validate returns the request's problems as an apperr Invalid error
// naming nationalId, for national ids of format; nil when it is fine. The
// message never repeats the id.
func (r Request) Validate(format nationalid.Format) error {
	if r.NationalID == "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "nationalId", Message: "is required"}})
	}
	if msg := format.Check(r.NationalID); msg != "" {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "nationalId", Message: msg}})
	}
	return nil
}

// ErrNotFound: no such erasure in the organization.
var ErrNotFound = apperr.New(apperr.NotFound, "No such erasure.")

// errInvalidExport is what Reapply returns for a file that is not an export.
var errInvalidExport = errors.New("erasure: not an export of erasures")

// Service is what the API, the console and the CLI use.
type Service interface {
	// Erase erases the person of in from organizationID in one
	// transaction, by is who asks. When nothing of the person is left and
	// they were erased before, it answers the latest erasure again
	// (Replayed) and changes nothing; otherwise it records a new one, with
	// its flow count (0 when the organization never held the person). before
	// runs in the erasure's transaction (audit, Idempotency-Key). A bad
	// national id is an apperr Invalid error.
	Erase(ctx context.Context, organizationID, by string, in Request, before ...database.BeforeCommit[Erasure]) (Erasure, error)
	// List returns up to limit of the organization's erasures, newest
	// first, without their kept receipts.
	List(ctx context.Context, organizationID string, limit int) ([]Erasure, error)
	// Get returns one erasure with its kept receipts. ErrNotFound.
	Get(ctx context.Context, organizationID, id string) (Erasure, error)
	// Verify checks that jws is an erasure receipt of this flowd, against
	// the receipt keys it publishes; an error wrapping ErrReceiptInvalid
	// says why not.
	Verify(ctx context.Context, jws string) (VerifiedReceipt, error)
	// RequestErasure records that the person of nationalID asks
	// organizationID to erase them, naming them by reference, one of
	// their flows' there, and publishes subject.erasure_requested. The
	// caller checks that the flow is theirs.
	RequestErasure(ctx context.Context, organizationID, nationalID, reference string) (PersonRequest, error)
	// QueueRequestsOf adds to b the read of the person's latest request to
	// each organization they asked to erase them, with when it was done;
	// the function gives them once b is sent.
	QueueRequestsOf(b *database.Batch, nationalID string) func(context.Context) ([]PersonRequest, error)
}

// Flows is what erasure needs of the flows module: the person's flows
// deleted, each as a deletion does, in erasure's transaction, and the
// canonical form of a national id, by which erasure names the person in
// its keyed hashes.
type Flows interface {
	EraseSubjectTx(ctx context.Context, tx database.Tx, organizationID, nationalID, by string) (flows.Erased, error)
	EraseMatchingTx(ctx context.Context, tx database.Tx, organizationID, by string, match func(forms []string) string) (map[string]flows.Erased, error)
	CanonicalNationalID(nationalID string) (string, error)
}

// SubjectKeys destroys a person's data key in an organization, in
// erasure's transaction: from destroyedAt nothing sealed under it can be
// read, backups included. found is false when the person had none.
type SubjectKeys interface {
	DestroySubjectKeyTx(ctx context.Context, tx database.Tx, organizationID, nationalID string) (destroyedAt time.Time, found bool, err error)
}

// Subjects gives a person's receipt subject in an organization, of their
// national id's canonical form: the consent module.
type Subjects interface {
	SubjectTx(ctx context.Context, tx database.Tx, organizationID, person string) (string, error)
}

// Forgetter forgets the kept answers to Idempotency-Keys that showed a
// flow, as a flow's deletion does.
type Forgetter interface {
	ForgetFlowTx(ctx context.Context, tx database.Tx, organizationID, flowID string) error
}

// Events publishes subject.erased and subject.erasure_requested: the
// webhooks module.
type Events interface {
	PublishSubjectTx(ctx context.Context, tx database.Tx, organizationID string, typ webhooks.EventType, at time.Time, data any) error
}

// AuditLog records an erasure repeated after a restore (the API and the
// console record their own).
type AuditLog interface {
	RecordAuditTx(ctx context.Context, tx database.Tx, e identity.AuditEntry) error
}

// OrganizationNames gives an organization's registered name, which the
// receipt names.
type OrganizationNames interface {
	OrganizationName(ctx context.Context, organizationID string) (string, error)
}
