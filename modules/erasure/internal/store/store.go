// Package store is the erasure module's SQL: its tombstones, the consent
// receipts they kept, and people's requests to be erased.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Erasure is a row of erasures: a tombstone.
type Erasure struct {
	OrganizationID string     `db:"organization_id"`
	ID             string     `db:"id"`
	Subject        string     `db:"subject"`
	SubjectKey     []byte     `db:"subject_key"`
	FlowCount      int        `db:"flow_count"`
	KeepReceipts   bool       `db:"keep_receipts"`
	KeyDestroyedAt *time.Time `db:"key_destroyed_at"`
	ErasedBy       string     `db:"erased_by"`
	ErasedAt       time.Time  `db:"erased_at"`
	Receipt        string     `db:"receipt"`
}

const erasureColumns = `organization_id, id::text, subject, subject_key, flow_count, keep_receipts,
	key_destroyed_at, erased_by, erased_at, receipt`

// InsertErasure stores e unless a tombstone of its id is there already,
// and reports whether it stored it.
func InsertErasure(ctx context.Context, db database.Querier, e Erasure) (bool, error) {
	tag, err := db.Exec(ctx, `insert into erasures (organization_id, id, subject, subject_key, flow_count, keep_receipts,
		key_destroyed_at, erased_by, erased_at, receipt) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		on conflict (organization_id, id) do nothing`, e.OrganizationID, e.ID, e.Subject, e.SubjectKey, e.FlowCount,
		e.KeepReceipts, e.KeyDestroyedAt, e.ErasedBy, e.ErasedAt, e.Receipt)
	return tag.RowsAffected() == 1, err
}

// LatestOfSubject returns the organization's latest erasure of the person
// of subjectKey. database.ErrNotFound.
func LatestOfSubject(ctx context.Context, db database.Querier, organizationID string, subjectKey []byte) (Erasure, error) {
	return one(db.Query(ctx, `select `+erasureColumns+` from erasures where organization_id = $1 and subject_key = $2
		order by erased_at desc, id desc limit 1`, organizationID, subjectKey))
}

// List returns up to limit of the organization's erasures, newest first.
func List(ctx context.Context, db database.Querier, organizationID string, limit int) ([]Erasure, error) {
	rows, err := db.Query(ctx, `select `+erasureColumns+` from erasures where organization_id = $1
		order by erased_at desc, id desc limit $2`, organizationID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Erasure])
}

// All returns every tombstone of every organization, oldest first.
func All(ctx context.Context, db database.Querier) ([]Erasure, error) {
	rows, err := db.Query(ctx, `select `+erasureColumns+` from erasures order by erased_at, organization_id, id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Erasure])
}

// Get returns one erasure. database.ErrNotFound.
func Get(ctx context.Context, db database.Querier, organizationID, id string) (Erasure, error) {
	return one(db.Query(ctx, `select `+erasureColumns+` from erasures where organization_id = $1 and id = $2`, organizationID, id))
}

func one(rows pgx.Rows, err error) (Erasure, error) {
	if err != nil {
		return Erasure{}, err
	}
	return notFound(pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Erasure]))
}

// notFound is v and err, with no row database.ErrNotFound.
func notFound[T any](v T, err error) (T, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return v, database.ErrNotFound
	}
	return v, err
}

// KeptReceipt is a row of erasure_kept_receipts.
type KeptReceipt struct {
	ReceiptID string `db:"receipt_id"`
	FlowID    string `db:"flow_id"`
	Receipt   string `db:"receipt"`
}

// InsertKeptReceipts stores the consent receipts an erasure keeps.
func InsertKeptReceipts(ctx context.Context, db database.Querier, organizationID, erasureID string, kept []KeptReceipt) error {
	for _, k := range kept {
		if _, err := db.Exec(ctx, `insert into erasure_kept_receipts (organization_id, erasure_id, receipt_id, flow_id, receipt)
			values ($1, $2, $3, $4, $5) on conflict do nothing`, organizationID, erasureID, k.ReceiptID, k.FlowID, k.Receipt); err != nil {
			return err
		}
	}
	return nil
}

// KeptReceipts returns the consent receipts an erasure kept.
func KeptReceipts(ctx context.Context, db database.Querier, organizationID, erasureID string) ([]KeptReceipt, error) {
	rows, err := db.Query(ctx, `select receipt_id, flow_id::text, receipt from erasure_kept_receipts
		where organization_id = $1 and erasure_id = $2 order by receipt_id`, organizationID, erasureID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[KeptReceipt])
}

// LockSubject holds, until tx ends, the lock that orders erasures of one
// person in one organization.
func LockSubject(ctx context.Context, db database.Querier, organizationID string, subjectKey []byte) error {
	_, err := db.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended($1 || encode($2, 'hex'), 0))`, organizationID, subjectKey)
	return err
}

// Request is a row of erasure_requests, with when its person was last
// erased from its organization since (erased_at, null when not yet).
type Request struct {
	OrganizationID string     `db:"organization_id"`
	ID             string     `db:"id"`
	Reference      string     `db:"reference"`
	RequestedAt    time.Time  `db:"requested_at"`
	ErasedAt       *time.Time `db:"erased_at"`
}

// InsertRequest records a person's request to be erased.
func InsertRequest(ctx context.Context, db database.Querier, r Request, subjectKey, personKey []byte) error {
	_, err := db.Exec(ctx, `insert into erasure_requests (organization_id, id, subject_key, person_key, reference, requested_at)
		values ($1, $2, $3, $4, $5, $6)`, r.OrganizationID, r.ID, subjectKey, personKey, r.Reference, r.RequestedAt)
	return err
}

// OpenRequest returns the latest request of the person of subjectKey to
// organizationID that no erasure of them there has followed. database.ErrNotFound.
func OpenRequest(ctx context.Context, db database.Querier, organizationID string, subjectKey []byte) (Request, error) {
	rows, err := db.Query(ctx, `select r.organization_id, r.id::text, r.reference, r.requested_at, null::timestamptz as erased_at
		from erasure_requests r where r.organization_id = $1 and r.subject_key = $2
			and not exists (select 1 from erasures e where e.organization_id = r.organization_id and e.subject_key = r.subject_key
				and e.erased_at >= r.requested_at)
		order by r.requested_at desc limit 1`, organizationID, subjectKey)
	if err != nil {
		return Request{}, err
	}
	return notFound(pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Request]))
}

// QueueRequestsOf adds to b the read of the latest request of the person of
// personKey to each organization, with the first erasure of them there
// since, and returns the function that gives them once b is sent.
func QueueRequestsOf(b *database.Batch, personKey []byte) func() ([]Request, error) {
	var (
		out []Request
		err = errors.New("store: the batch did not reach the erasure requests")
	)
	b.QueueRows(`select distinct on (r.organization_id) r.organization_id, r.id::text, r.reference, r.requested_at,
			(select min(e.erased_at) from erasures e where e.organization_id = r.organization_id and e.subject_key = r.subject_key
				and e.erased_at >= r.requested_at) as erased_at
		from erasure_requests r where r.person_key = $1
		order by r.organization_id, r.requested_at desc`, []any{personKey}, func(rows database.Rows) error {
		out, err = pgx.CollectRows(rows, pgx.RowToStructByName[Request])
		return err
	})
	return func() ([]Request, error) { return out, err }
}
