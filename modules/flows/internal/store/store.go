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

// DeleteFlow removes a flow; its tasks and incidents go with it. The
// idempotency key that created it stays, so that a replay within 24 hours
// answers the first response as the API promises: the key's row holds only a
// keyed hash of the request and the sealed consent link, and it is purged
// once it expires, at most 24 hours after the create.
func DeleteFlow(ctx context.Context, db DB, organizationID, id string) error {
	_, err := db.Exec(ctx, `delete from flows where organization_id = $1 and id = $2`, organizationID, id)
	return err
}

// IdempotencyKey is a row of flow_idempotency_keys.
type IdempotencyKey struct {
	OrganizationID string `db:"organization_id"`
	Key            string `db:"key"`
	RequestHash    []byte `db:"request_hash"`
	FlowID         string `db:"flow_id"`
	ReferenceID    string `db:"reference_id"`
	PIIKeyID       string `db:"pii_key_id"`
	ConsentSealed  []byte `db:"consent_sealed"`
}

var keyRows = newTable[IdempotencyKey]()

// ClaimKey records k for a create that is about to happen, unless an
// unexpired row holds the key already; it reports whether the claim won. A
// concurrent claim of the same key waits here until the first transaction
// ends, and then sees its row. The conflict's update takes the time from
// the row it would have inserted: on Citus it may not call now() itself.
func ClaimKey(ctx context.Context, db DB, k IdempotencyKey, ttl time.Duration) (bool, error) {
	tag, err := db.Exec(ctx, `insert into flow_idempotency_keys
		(organization_id, key, request_hash, flow_id, pii_key_id, created_at, expires_at)
		values ($1, $2, $3, $4, $5, now(), now() + $6 * interval '1 microsecond')
		on conflict (organization_id, key) do update set request_hash = excluded.request_hash,
			flow_id = excluded.flow_id, reference_id = '', pii_key_id = excluded.pii_key_id,
			consent_sealed = null, created_at = excluded.created_at, expires_at = excluded.expires_at
		where flow_idempotency_keys.expires_at <= excluded.created_at`,
		k.OrganizationID, k.Key, k.RequestHash, k.FlowID, k.PIIKeyID, ttl.Microseconds())
	return tag.RowsAffected() == 1, err
}

// CompleteKey stores the result of the create that claimed a key.
func CompleteKey(ctx context.Context, db DB, k IdempotencyKey) error {
	_, err := db.Exec(ctx, `update flow_idempotency_keys set reference_id = $3, pii_key_id = $4, consent_sealed = $5
		where organization_id = $1 and key = $2`, k.OrganizationID, k.Key, k.ReferenceID, k.PIIKeyID, k.ConsentSealed)
	return err
}

// GetKey returns the unexpired row of a key. database.ErrNotFound.
func GetKey(ctx context.Context, db DB, organizationID, key string) (IdempotencyKey, error) {
	return keyRows.one(db.Query(ctx, `select `+keyRows.columns+`
		from flow_idempotency_keys where organization_id = $1 and key = $2 and expires_at > now()`, organizationID, key))
}

// KeyHeld reports whether an unexpired row holds a key.
func KeyHeld(ctx context.Context, db DB, organizationID, key string) (bool, error) {
	var held bool
	err := db.QueryRow(ctx, `select exists (select from flow_idempotency_keys
		where organization_id = $1 and key = $2 and expires_at > now())`, organizationID, key).Scan(&held)
	return held, err
}

// PurgeKeys deletes up to limit expired idempotency keys of every
// organization and returns how many. The keys are chosen by primary key,
// not ctid: on Citus the choice is made over every shard, where a ctid
// names a different row on each.
func PurgeKeys(ctx context.Context, db DB, limit int) (int64, error) {
	tag, err := db.Exec(ctx, `delete from flow_idempotency_keys where (organization_id, key) in (
		select organization_id, key from flow_idempotency_keys where expires_at <= now() limit $1)`, limit)
	return tag.RowsAffected(), err
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
