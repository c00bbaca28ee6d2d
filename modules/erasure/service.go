package erasure

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/erasure/internal/store"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/modules/webhooks"
)

// Deps are the erasure module's collaborators, every one required.
type Deps struct {
	Pool     *pgxpool.Pool
	Flows    Flows
	Keys     SubjectKeys
	Subjects Subjects
	Answers  Forgetter
	Events   Events
	Audit    AuditLog
	Signer   ReceiptSigner
	Orgs     OrganizationNames
	// KeyEncryptionKey (FLOWD_KEY_ENCRYPTION_KEY) keys the tombstones'
	// subject keys, which stay outside any backup of the database.
	KeyEncryptionKey []byte
	// Issuer is the receipts' iss, flowd's base URL.
	Issuer string
}

// Module is the erasure module on PostgreSQL.
type Module struct {
	pool       *pgxpool.Pool
	flows      Flows
	keys       SubjectKeys
	subjects   Subjects
	answers    Forgetter
	events     Events
	audit      AuditLog
	signer     ReceiptSigner
	orgs       OrganizationNames
	subjectKey []byte
	issuer     string
}

var _ Service = (*Module)(nil)

// New returns the erasure module.
func New(d Deps) *Module {
	mac := hmac.New(sha256.New, d.KeyEncryptionKey)
	mac.Write([]byte("flowd erasure subject key v1"))
	issuer := strings.TrimRight(d.Issuer, "/")
	return &Module{pool: d.Pool, flows: d.Flows, keys: d.Keys, subjects: d.Subjects, answers: d.Answers, events: d.Events,
		audit: d.Audit, signer: d.Signer, orgs: d.Orgs, subjectKey: mac.Sum(nil), issuer: issuer}
}

// subjectKeyOf is the person's key in a tombstone and a request: an HMAC
// of the organization and the national id's canonical form, person, under
// a key derived from the key encryption key. A backup of the database
// alone cannot tell whom it names.
func (m *Module) subjectKeyOf(organizationID, person string) []byte {
	mac := hmac.New(sha256.New, m.subjectKey)
	mac.Write([]byte(organizationID))
	mac.Write([]byte{0})
	mac.Write([]byte(person))
	return mac.Sum(nil)
}

// person is the canonical form of in's national id, or an apperr Invalid
// error naming nationalId when it is none; the message never repeats it.
func (m *Module) person(in Request) (string, error) {
	if in.NationalID == "" {
		return "", apperr.InvalidFields([]apperr.FieldError{{Field: "nationalId", Message: "is required"}})
	}
	person, err := m.flows.CanonicalNationalID(in.NationalID)
	if err != nil {
		return "", apperr.InvalidFields([]apperr.FieldError{{Field: "nationalId", Message: err.Error()}})
	}
	return person, nil
}

// ErasedEvent is the data of subject.erased: nothing personal.
type ErasedEvent struct {
	ErasureID      string `json:"erasureId"`
	OrganizationID string `json:"organizationId"`
	ErasedAt       string `json:"erasedAt"`
	FlowCount      int    `json:"flowCount"`
}

// Erase implements Service.
func (m *Module) Erase(ctx context.Context, organizationID, by string, in Request, before ...database.BeforeCommit[Erasure]) (Erasure, error) {
	person, err := m.person(in)
	if err != nil {
		return Erasure{}, err
	}
	key := m.subjectKeyOf(organizationID, person)
	var out Erasure
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		if err := store.LockSubject(ctx, tx, organizationID, key); err != nil {
			return err
		}
		erased, err := m.flows.EraseSubjectTx(ctx, tx, organizationID, in.NationalID, by)
		if err != nil {
			return err
		}
		if len(erased.Deletions) == 0 {
			previous, err := store.LatestOfSubject(ctx, tx, organizationID, key)
			if err == nil {
				out = fromRow(previous)
				out.Replayed = true
				return database.RunBeforeCommit(ctx, tx, out, before)
			}
			if !errors.Is(err, database.ErrNotFound) {
				return err
			}
		}
		subject, err := m.subjects.SubjectTx(ctx, tx, organizationID, person)
		if err != nil {
			return err
		}
		destroyedAt, destroyed, err := m.keys.DestroySubjectKeyTx(ctx, tx, organizationID, in.NationalID)
		if err != nil {
			return err
		}
		var keyDestroyedAt *time.Time
		if destroyed {
			keyDestroyedAt = &destroyedAt
		}
		out = Erasure{ID: uuid.Must(uuid.NewV7()).String(), OrganizationID: organizationID, Subject: subject,
			FlowCount: len(erased.Deletions), KeepReceipts: in.KeepReceipts, KeyDestroyedAt: keyDestroyedAt,
			ErasedBy: by, ErasedAt: time.Now().UTC().Truncate(time.Microsecond)}
		if err := m.recordTx(ctx, tx, &out, key, erased); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, out, before)
	})
	if err != nil {
		return Erasure{}, fmt.Errorf("erasure: %w", err)
	}
	return out, nil
}

// recordTx signs e's receipt and stores its tombstone, the receipts it
// keeps, forgets the answers that showed its flows, and publishes
// subject.erased.
func (m *Module) recordTx(ctx context.Context, tx database.Tx, e *Erasure, key []byte, erased flows.Erased) error {
	if e.Receipt == "" {
		receipt, err := m.signReceiptTx(ctx, tx, *e)
		if err != nil {
			return err
		}
		e.Receipt = receipt
	}
	if _, err := store.InsertErasure(ctx, tx, toRow(*e, key)); err != nil {
		return err
	}
	if err := m.keepTx(ctx, tx, e, erased); err != nil {
		return err
	}
	return m.events.PublishSubjectTx(ctx, tx, e.OrganizationID, webhooks.SubjectErased, e.ErasedAt, ErasedEvent{
		ErasureID: e.ID, OrganizationID: e.OrganizationID, ErasedAt: e.ErasedAt.Format(time.RFC3339Nano), FlowCount: e.FlowCount})
}

// keepTx forgets the answers that showed the erased flows and, when e
// keeps receipts, stores those of the flows.
func (m *Module) keepTx(ctx context.Context, tx database.Tx, e *Erasure, erased flows.Erased) error {
	for _, d := range erased.Deletions {
		if err := m.answers.ForgetFlowTx(ctx, tx, e.OrganizationID, d.FlowID); err != nil {
			return err
		}
	}
	if !e.KeepReceipts || len(erased.Receipts) == 0 {
		return nil
	}
	kept := make([]store.KeptReceipt, len(erased.Receipts))
	for i, r := range erased.Receipts {
		kept[i] = store.KeptReceipt{ReceiptID: r.ID, FlowID: r.FlowID, Receipt: r.Body}
		e.KeptReceipts = append(e.KeptReceipts, KeptReceipt{ID: r.ID, FlowID: r.FlowID, JWS: r.Body})
	}
	return store.InsertKeptReceipts(ctx, tx, e.OrganizationID, e.ID, kept)
}

func toRow(e Erasure, key []byte) store.Erasure {
	return store.Erasure{OrganizationID: e.OrganizationID, ID: e.ID, Subject: e.Subject, SubjectKey: key, FlowCount: e.FlowCount,
		KeepReceipts: e.KeepReceipts, KeyDestroyedAt: e.KeyDestroyedAt, ErasedBy: e.ErasedBy, ErasedAt: e.ErasedAt, Receipt: e.Receipt}
}

func fromRow(r store.Erasure) Erasure {
	return Erasure{ID: r.ID, OrganizationID: r.OrganizationID, Subject: r.Subject, FlowCount: r.FlowCount,
		KeepReceipts: r.KeepReceipts, KeyDestroyedAt: utc(r.KeyDestroyedAt), ErasedBy: r.ErasedBy, ErasedAt: r.ErasedAt.UTC(), Receipt: r.Receipt}
}

// utc is t in UTC, or nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// maxList bounds List.
const maxList = 100

// List implements Service.
func (m *Module) List(ctx context.Context, organizationID string, limit int) ([]Erasure, error) {
	if limit < 1 || limit > maxList {
		limit = maxList
	}
	rows, err := store.List(ctx, m.pool, organizationID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Erasure, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Get implements Service.
func (m *Module) Get(ctx context.Context, organizationID, id string) (Erasure, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Erasure{}, ErrNotFound
	}
	row, err := store.Get(ctx, m.pool, organizationID, id)
	if errors.Is(err, database.ErrNotFound) {
		return Erasure{}, ErrNotFound
	}
	if err != nil {
		return Erasure{}, err
	}
	e := fromRow(row)
	kept, err := store.KeptReceipts(ctx, m.pool, organizationID, id)
	if err != nil {
		return Erasure{}, err
	}
	for _, k := range kept {
		e.KeptReceipts = append(e.KeptReceipts, KeptReceipt{ID: k.ReceiptID, FlowID: k.FlowID, JWS: k.Receipt})
	}
	return e, nil
}
