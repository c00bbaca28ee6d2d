package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// LockForDecision reads a flow of organizationID locked for update, its open
// incidents and the id of its latest attachment of receiptKind ("" when it
// has none), in one round trip: the flow's lock is taken first, so the other
// two are read under it. database.ErrNotFound.
func LockForDecision(ctx context.Context, db DB, organizationID, id, receiptKind string) (Flow, []Incident, string, error) {
	var b pgx.Batch
	b.Queue(flowByIDSQL+` for update`, organizationID, id)
	b.Queue(openIncidentsSQL, organizationID, []string{id})
	b.Queue(`select id::text from flow_attachments where organization_id = $1 and flow_id = $2 and kind = $3
		order by created_at desc, id desc limit 1`, organizationID, id, receiptKind)
	br := db.SendBatch(ctx, &b)
	defer br.Close()
	f, err := flowRows.one(br.Query())
	if err != nil {
		return Flow{}, nil, "", err
	}
	incidents, err := incidentRows.all(br.Query())
	if err != nil {
		return Flow{}, nil, "", err
	}
	var lastReceipt string
	if err := br.QueryRow().Scan(&lastReceipt); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Flow{}, nil, "", err
	}
	return f, incidents, lastReceipt, br.Close()
}

// Decision is what a decision writes on its flow.
type Decision struct {
	ConsentStatus     string // Accepted or Rejected
	At                time.Time
	ConsentTextSHA256 []byte
	ConsentLanguage   *string
	AssuranceLevel    *string
	ACR               *string
	ValidUntil        *time.Time
}

// RecordDecision completes an active flow of organizationID whose consent
// has not expired at d.At with the person's answer and its evidence, opens
// it too when it was not yet, bumps its version and returns it. database.ErrNotFound
// when the flow is not active, has expired, or is gone: the condition holds
// under the update's own row lock, so a decision is recorded at most once.
func RecordDecision(ctx context.Context, db DB, organizationID, id string, d Decision) (Flow, error) {
	return flowRows.one(db.Query(ctx, `update flows set consent_status = $3, process_status = 'completed',
		decided_at = $4, opened_at = coalesce(opened_at, $4), consent_text_sha256 = $5, consent_language = $6,
		assurance_level = $7, acr = $8, valid_until = $9, version = version + 1, updated_at = greatest(now(), updated_at)
		where organization_id = $1 and id = $2 and process_status = 'active' and expires_at > $4
		returning `+flowColumns,
		organizationID, id, d.ConsentStatus, d.At, d.ConsentTextSHA256, d.ConsentLanguage, d.AssuranceLevel, d.ACR, d.ValidUntil))
}

// RecordWithdrawal moves an accepted flow of organizationID to Withdrawn at
// at by by, bumps its version and returns it. database.ErrNotFound when the flow is not
// accepted (never was, withdrawn or expired already) or is gone.
func RecordWithdrawal(ctx context.Context, db DB, organizationID, id string, at time.Time, by string) (Flow, error) {
	return flowRows.one(db.Query(ctx, `update flows set consent_status = 'Withdrawn', withdrawn_at = $3, withdrawn_by = $4,
		version = version + 1, updated_at = greatest(now(), updated_at)
		where organization_id = $1 and id = $2 and consent_status = 'Accepted'
		returning `+flowColumns, organizationID, id, at, by))
}
