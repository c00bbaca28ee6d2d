package erasure

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/erasure/internal/store"
	"github.com/flowd/flowd/modules/webhooks"
)

// PersonRequest is a person's request that an organization erase them, as
// their own page shows it.
type PersonRequest struct {
	OrganizationID   string
	OrganizationName string
	RequestedAt      time.Time
	// ErasedAt is when the organization erased them since; nil until then.
	ErasedAt *time.Time
	// Pending is set when RequestErasure answers with the person's earlier
	// request, which the organization has not yet carried out.
	Pending bool
}

// ErasureRequestedEvent is the data of subject.erasure_requested: the
// person only by their receipt subject and a reference of theirs.
type ErasureRequestedEvent struct {
	RequestID      string `json:"requestId"`
	OrganizationID string `json:"organizationId"`
	Subject        string `json:"subject"`
	Reference      string `json:"reference"`
	RequestedAt    string `json:"requestedAt"`
}

// personKeyOf is the person's key across organizations, by which their
// own page finds their requests: an HMAC of the national id's canonical
// form, person, under the tombstones' key, in a domain of its own.
func (m *Module) personKeyOf(person string) []byte {
	mac := hmac.New(sha256.New, m.subjectKey)
	mac.Write([]byte("person\x00"))
	mac.Write([]byte(person))
	return mac.Sum(nil)
}

// RequestErasure records that the person of nationalID asks organizationID
// to erase them, and tells the organization with subject.erasure_requested,
// naming them by their receipt subject and reference, one of their flows'
// references there. The caller has made sure the person has that flow. A
// person has one open request per organization: while the organization
// has not erased them since their last request, asking again records
// nothing, tells no one and answers that request, Pending. The erasures of
// the person there take the same lock, so that a request and an erasure
// are ordered.
func (m *Module) RequestErasure(ctx context.Context, organizationID, nationalID, reference string) (PersonRequest, error) {
	person, err := m.flows.CanonicalNationalID(nationalID)
	if err != nil {
		return PersonRequest{}, err
	}
	subjectKey := m.subjectKeyOf(organizationID, person)
	r := store.Request{OrganizationID: organizationID, ID: uuid.Must(uuid.NewV7()).String(), Reference: reference,
		RequestedAt: time.Now().UTC().Truncate(time.Microsecond)}
	out := PersonRequest{OrganizationID: organizationID, RequestedAt: r.RequestedAt}
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		if err := store.LockSubject(ctx, tx, organizationID, subjectKey); err != nil {
			return err
		}
		open, err := store.OpenRequest(ctx, tx, organizationID, subjectKey)
		if err == nil {
			out = PersonRequest{OrganizationID: organizationID, RequestedAt: open.RequestedAt.UTC(), Pending: true}
			return nil
		}
		if !errors.Is(err, database.ErrNotFound) {
			return err
		}
		subject, err := m.subjects.SubjectTx(ctx, tx, organizationID, person)
		if err != nil {
			return err
		}
		if err := store.InsertRequest(ctx, tx, r, subjectKey, m.personKeyOf(person)); err != nil {
			return err
		}
		return m.events.PublishSubjectTx(ctx, tx, organizationID, webhooks.SubjectErasureRequested, r.RequestedAt, requestedData(r, subject))
	})
	if err != nil {
		return PersonRequest{}, err
	}
	return out, nil
}

// requestedData is the event data of request r of the person of subject.
func requestedData(r store.Request, subject string) ErasureRequestedEvent {
	return ErasureRequestedEvent{RequestID: r.ID, OrganizationID: r.OrganizationID, Subject: subject, Reference: r.Reference,
		RequestedAt: r.RequestedAt.Format(time.RFC3339Nano)}
}

// QueueRequestsOf implements Service.
func (m *Module) QueueRequestsOf(b *database.Batch, nationalID string) func(context.Context) ([]PersonRequest, error) {
	person, err := m.flows.CanonicalNationalID(nationalID)
	if err != nil {
		return func(context.Context) ([]PersonRequest, error) { return nil, nil }
	}
	read := store.QueueRequestsOf(b, m.personKeyOf(person))
	return func(ctx context.Context) ([]PersonRequest, error) {
		rows, err := read()
		if err != nil {
			return nil, err
		}
		out := make([]PersonRequest, len(rows))
		for i, r := range rows {
			name, err := m.orgs.OrganizationName(ctx, r.OrganizationID)
			if err != nil {
				return nil, err
			}
			out[i] = PersonRequest{OrganizationID: r.OrganizationID, OrganizationName: name, RequestedAt: r.RequestedAt.UTC(), ErasedAt: r.ErasedAt}
		}
		return out, nil
	}
}
