// Package store is the flows module's SQL. It speaks in rows, with personal
// data still sealed; the flows package turns them into domain types.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// DB is a pool or a transaction: a Querier that also sends batches.
type DB interface {
	database.Querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// NextEventSequence counts one more event of a flow, which the caller holds
// locked, and returns its sequence number. A new flow's flow.created is 1,
// set by InsertNumberedFlow.
func NextEventSequence(ctx context.Context, db DB, organizationID, flowID string) (int, error) {
	var n int
	err := db.QueryRow(ctx, `update flows set event_sequence = event_sequence + 1
		where organization_id = $1 and id = $2 returning event_sequence`, organizationID, flowID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, database.ErrNotFound
	}
	return n, err
}

// FlowKey names a flow of any organization.
type FlowKey struct {
	OrganizationID string `db:"organization_id"`
	ID             string `db:"id"`
}

var flowKeyRows = newTable[FlowKey]()

// DueForExpiry returns up to limit active flows whose consent expired by
// now, of every organization. It locks nothing: a statement over every
// organization's rows cannot lock them on Citus, so the caller locks each
// with LockDueForExpiry.
func DueForExpiry(ctx context.Context, db DB, now time.Time, limit int) ([]FlowKey, error) {
	return flowKeyRows.all(db.Query(ctx, `select `+flowKeyRows.columns+` from flows
		where process_status = 'active' and expires_at <= $1 order by expires_at limit $2`, now, limit))
}

// DueAcceptances returns up to limit acceptances of every organization
// whose valid_until has passed. It locks nothing (see DueForExpiry):
// ExpireAcceptance decides on each.
func DueAcceptances(ctx context.Context, db DB, limit int) ([]FlowKey, error) {
	return flowKeyRows.all(db.Query(ctx, `select `+flowKeyRows.columns+` from flows
		where consent_status = 'Accepted' and valid_until <= now() order by valid_until limit $1`, limit))
}

// DeleteFlow removes a flow; its tasks and incidents go with it.
func DeleteFlow(ctx context.Context, db DB, organizationID, id string) error {
	_, err := db.Exec(ctx, `delete from flows where organization_id = $1 and id = $2`, organizationID, id)
	return err
}

// Deletion is a row of flow_deletions.
type Deletion struct {
	ID             int64     `db:"id"`
	OrganizationID string    `db:"organization_id"`
	FlowID         string    `db:"flow_id"`
	ReferenceID    string    `db:"reference_id"`
	DeletedBy      string    `db:"deleted_by"`
	ReceiptIDs     []string  `db:"receipt_ids"`
	DeletedAt      time.Time `db:"deleted_at"`
}

var deletionRows = newTable[Deletion]()

// InsertDeletion logs a deletion and reads the entry back into d.
func InsertDeletion(ctx context.Context, db DB, d *Deletion) error {
	receiptIDs := d.ReceiptIDs
	if receiptIDs == nil {
		receiptIDs = []string{}
	}
	inserted, err := deletionRows.one(db.Query(ctx, `insert into flow_deletions
		(organization_id, flow_id, reference_id, deleted_by, receipt_ids)
		values ($1, $2, $3, $4, $5::text[]::uuid[]) returning `+deletionRows.columns,
		d.OrganizationID, d.FlowID, d.ReferenceID, d.DeletedBy, receiptIDs))
	if err != nil {
		return err
	}
	*d = inserted
	return nil
}

// DeletionOf returns the deletion log's latest entry of an organization's
// flow; database.ErrNotFound when it was never deleted.
func DeletionOf(ctx context.Context, db DB, organizationID, flowID string) (Deletion, error) {
	return deletionRows.one(db.Query(ctx, `select `+deletionRows.columns+`
		from flow_deletions where organization_id = $1 and flow_id = $2
		order by id desc limit 1`, organizationID, flowID))
}

// Deletions lists an organization's deletion log newest first, starting after
// the entry of flow before ("" for the first page), limit+1 rows at most.
func Deletions(ctx context.Context, db DB, organizationID string, limit int, before string) ([]Deletion, error) {
	return deletionRows.all(db.Query(ctx, `select `+deletionRows.columns+`
		from flow_deletions where organization_id = $1 and ($3 = '' or (deleted_at, id) < (
			select deleted_at, id from flow_deletions where organization_id = $1 and flow_id::text = $3
			order by id desc limit 1))
		order by deleted_at desc, id desc limit $2`, organizationID, limit+1, before))
}

// Attachment is a row of flow_attachments.
type Attachment struct {
	OrganizationID string    `db:"organization_id"`
	ID             string    `db:"id"`
	FlowID         string    `db:"flow_id"`
	Kind           string    `db:"kind"`
	ContentType    string    `db:"content_type"`
	Body           string    `db:"body"`
	CreatedAt      time.Time `db:"created_at"`
}

var attachmentRows = newTable[Attachment]()

// InsertAttachment stores a and counts it in its flow's num_attachments,
// in one statement; created_at is the database clock's. It reads the row
// back into a.
func InsertAttachment(ctx context.Context, db DB, a *Attachment) error {
	inserted, err := attachmentRows.one(db.Query(ctx, `with counted as (
			update flows set num_attachments = num_attachments + 1 where organization_id = $1 and id = $3)
		insert into flow_attachments (organization_id, id, flow_id, kind, content_type, body)
		values ($1, $2, $3, $4, $5, $6) returning `+attachmentRows.columns,
		a.OrganizationID, a.ID, a.FlowID, a.Kind, a.ContentType, a.Body))
	if err != nil {
		return err
	}
	*a = inserted
	return nil
}

// Attachments lists a flow's attachments, oldest first, with their bodies
// when withBody is set.
func Attachments(ctx context.Context, db DB, organizationID, flowID string, withBody bool) ([]Attachment, error) {
	return attachmentRows.all(db.Query(ctx, attachmentsSQL, organizationID, flowID, withBody))
}

const attachmentsSQL = `select organization_id, id, flow_id, kind, content_type,
	case when $3 then body else '' end as body, created_at
	from flow_attachments where organization_id = $1 and flow_id = $2 order by created_at, id`

// GetAttachment returns one of a flow's attachments with its body. database.ErrNotFound.
func GetAttachment(ctx context.Context, db DB, organizationID, flowID, id string) (Attachment, error) {
	return attachmentRows.one(db.Query(ctx, `select `+attachmentRows.columns+`
		from flow_attachments where organization_id = $1 and flow_id = $2 and id = $3`, organizationID, flowID, id))
}

// DeleteAttachments removes a flow's attachments and returns their ids.
func DeleteAttachments(ctx context.Context, db DB, organizationID, flowID string) ([]string, error) {
	rows, err := db.Query(ctx, `delete from flow_attachments where organization_id = $1 and flow_id = $2 returning id`,
		organizationID, flowID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
