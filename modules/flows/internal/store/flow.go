package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Flow is a row of flows. Each field's db tag names its column, and the
// statements that read or write whole flows are made from the tags
// (flowColumns, insertFlowSQL, saveFlowSQL), so a new column is one
// more field here. A field the create writes is tagged write:"create", one
// that SaveState writes write:"save"; the database sets the others, and
// both writes read those back.
type Flow struct {
	ID                 string  `db:"id" write:"create"`
	OrganizationID     string  `db:"organization_id" write:"create"`
	Number             int64   `db:"flow_number"`  // drawn by the create
	ReferenceID        string  `db:"reference_id"` // prefix-number, made by the create
	ReferenceName      *string `db:"reference_name" write:"create"`
	Version            int     `db:"version"`
	ConsentStatus      string  `db:"consent_status" write:"create,save"`
	ProcessStatus      string  `db:"process_status" write:"create,save"`
	Sandbox            bool    `db:"sandbox" write:"create"`
	PIIKeyID           string  `db:"pii_key_id" write:"create"`
	NationalIDSealed   []byte  `db:"national_id_sealed" write:"create"`
	NationalIDHMAC     []byte  `db:"national_id_hmac" write:"create"`
	LastNameSealed     []byte  `db:"last_name_sealed" write:"create"`
	RedirectURL        string  `db:"redirect_url" write:"create"`
	WebhookURL         string  `db:"webhook_url" write:"create"`
	OrganizationNumber string  `db:"organization_number" write:"create"`
	ProcessInstanceID  string  `db:"process_instance_id" write:"create"`
	// The pinned consent definition version, and the decision's evidence.
	FlowDefinitionID      string  `db:"flow_definition_id" write:"create"`
	FlowDefinitionVersion int     `db:"flow_definition_version" write:"create"`
	VersionTag            *string `db:"version_tag" write:"create"`
	// Parameters are the values the flow gives its definition's
	// parameters; null when it has none.
	Parameters         map[string]string `db:"parameters" write:"create"`
	ConsentTextSHA256  []byte            `db:"consent_text_sha256" write:"save"`
	ConsentLanguage    *string           `db:"consent_language" write:"save"`
	AssuranceLevel     *string           `db:"assurance_level" write:"save"`
	ACR                *string           `db:"acr" write:"save"`
	ValidUntil         *time.Time        `db:"valid_until" write:"save"`
	CreatedBy          string            `db:"created_by" write:"create"`
	HasErrors          bool              `db:"has_errors" write:"save"`
	CreatedAt          time.Time         `db:"created_at"`
	UpdatedAt          time.Time         `db:"updated_at"`
	OpenedAt           *time.Time        `db:"opened_at" write:"save"`
	DecidedAt          *time.Time        `db:"decided_at" write:"save"`
	WithdrawnAt        *time.Time        `db:"withdrawn_at" write:"save"`
	WithdrawnBy        *string           `db:"withdrawn_by" write:"save"`
	NumAttachments     int               `db:"num_attachments"`      // counted by InsertAttachment
	ExpiresAt          time.Time         `db:"expires_at"`           // the create's time plus the consent's time to live
	ExpiredAt          *time.Time        `db:"expired_at"`           // when ExpireAcceptance ended the acceptance's validity
	NumUses            int               `db:"num_uses"`             // counted by InsertUse
	LastUsedAt         *time.Time        `db:"last_used_at"`         // the latest use's used_at, by InsertUse
	ExpiringNotifiedAt *time.Time        `db:"expiring_notified_at"` // claimed by ClaimExpiringNotice
	// The blind index of the national id and its key's version, on rows
	// not yet under a subject key (whose row holds it for the flows sealed
	// under it); null on rows made before there was one, until the
	// re-index fills them.
	PersonIndex    []byte  `db:"person_index"`
	PersonIndexKey *string `db:"person_index_key"`
	// The subject key the personal data is sealed under (then PIIKeyID is
	// SubjectSealed); null on rows still sealed under a data key.
	SubjectKeyID *string `db:"subject_key_id" write:"create"`
	// The subject key itself, sealed under a data key, read in the
	// statement that reads the row: null once the key is destroyed, so
	// that no read opens a destroyed person's data. The data key's id is
	// not read with it (a second look-up): the configured data keys are
	// tried, the current first.
	SubjectKeySealed []byte `db:"subject_key_sealed" write:"-" select:"(select k.key_sealed from subject_keys k where k.organization_id = flows.organization_id and k.id = flows.subject_key_id)"`
}

// Flows' rows, and the columns each write sets, from Flow's tags.
var (
	flowRows = newTable[Flow]()
	// flowColumns is flowRows.columns for a statement whose organization
	// is $1: the subject key's sub-queries name the organization as the
	// statement does, so that Citus routes them with the flow, to one node.
	flowColumns   = ofOrganization(flowRows.columns)
	createColumns = flowRows.writes("create")
	saveColumns   = flowRows.writes("save")
	setColumns    = columnList(flowRows.writes("")) // by the database
)

// ofOrganization is a select list of flows' columns with the subject key's
// sub-queries keyed by the organization $1.
func ofOrganization(columns string) string {
	return strings.ReplaceAll(columns, "k.organization_id = flows.organization_id", "k.organization_id = $1")
}

// Statements made from Flow's tags.
var (
	// saveFlowSQL writes the save columns of flow $2 of organization $1
	// from $3 on, and bumps its version and updated_at.
	saveFlowSQL = `update flows set version = version + 1, updated_at = greatest(now(), updated_at),
	` + assignments(3, saveColumns) + `
	where organization_id = $1 and id = $2
	returning ` + setColumns

	flowByIDSQL = `select ` + flowColumns + ` from flows where organization_id = $1 and id = $2`

	// insertFlowSQL draws the next flow number of organization $1 and names
	// the flow $2-number; its consent expires $3 microseconds after the
	// database's now. The create's columns follow from $4; the save's that
	// it does not write are null or their defaults. The flow's flow.created
	// is its first event. It inserts the flow only while its subject key,
	// the last parameter, is live, and holds the key against its
	// destruction until the flow commits; a destruction that committed
	// first is seen. A live key is asked for as one whose key_sealed is
	// there, not whose destroyed_at is not: PostgreSQL, planning for a
	// table it believes small, would walk the organization's keys in the
	// index of live subjects, whose predicate that is, and keep the plan.
	insertFlowSQL = `with n as (select flowd_next_flow_number($1) as v where exists (
		select 1 from subject_keys where organization_id = $1 and id = $` + strconv.Itoa(4+len(createColumns)) + `
		and key_sealed is not null for share))
	insert into flows (flow_number, reference_id, expires_at, event_sequence, ` + columnList(createColumns) + `)
	select n.v, $2 || '-' || n.v, now() + $3 * interval '1 microsecond', 1, ` + placeholders(4, len(createColumns)) + `
	from n
	returning ` + setColumns
)

// InsertNumberedFlow takes the organization's next flow number, names the
// flow prefix-number and inserts it with tasks, all in one round trip: the
// number is drawn inside the insert, and the tasks' inserts ride in the same
// batch. It takes created_at and updated_at from the database clock, and
// the consent expires ttl later; it reads what the database set into f and
// tasks.
//
// f is sealed under the subject key f.SubjectKeyID. key, when its KeySealed
// is set, is inserted in the same round trip, first, as the person's new
// key, unless they have a live key already under one of subjects
// (key.Subject first). The flow is inserted only while the key it names is
// live, which the insert holds against its destruction until the
// transaction ends; when it is not (the person had another key, which the
// caller then finds and seals under, or it was destroyed meanwhile)
// nothing is inserted and it returns ErrSubjectKeyMissing.
func InsertNumberedFlow(ctx context.Context, db DB, f *Flow, key SubjectKey, subjects [][]byte, prefix string, ttl time.Duration, tasks ...*Task) error {
	var b pgx.Batch
	if key.KeySealed != nil {
		b.Queue(insertSubjectKeySQL(len(subjects)), insertSubjectKeyArgs(key, subjects)...)
	}
	b.Queue(insertFlowSQL, append(flowRows.values([]any{f.OrganizationID, prefix, ttl.Microseconds()}, f, createColumns), *f.SubjectKeyID)...)
	for _, t := range tasks {
		b.Queue(insertTaskOfNewFlowSQL, t.OrganizationID, t.ID, t.FlowID, t.TaskType, t.TaskCategory, t.Status)
	}
	br := db.SendBatch(ctx, &b)
	defer br.Close()
	if key.KeySealed != nil {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rows, err := br.Query()
	if err := flowRows.fill(f, rows, err); errors.Is(err, database.ErrNotFound) {
		return ErrSubjectKeyMissing
	} else if err != nil {
		return err
	}
	for _, t := range tasks {
		rows, err := br.Query()
		if err := taskRows.fill(t, rows, err); err != nil {
			return err
		}
	}
	return br.Close()
}

// GetFlow returns a flow of organizationID, locked for update when lock is
// set. database.ErrNotFound.
func GetFlow(ctx context.Context, db DB, organizationID, id string, lock bool) (Flow, error) {
	q := flowByIDSQL
	if lock {
		q += ` for update`
	}
	return flowRows.one(db.Query(ctx, q, organizationID, id))
}

// SaveState writes f's state and its decision's evidence (its save
// columns), bumps its version and updated_at, and reads what the database
// set into f. database.ErrNotFound.
func SaveState(ctx context.Context, db DB, f *Flow) error {
	rows, err := db.Query(ctx, saveFlowSQL, flowRows.values([]any{f.OrganizationID, f.ID}, f, saveColumns)...)
	return flowRows.fill(f, rows, err)
}

// LockDueForExpiry returns a flow DueForExpiry found, locked for update, when
// it is still active and expired by now. database.ErrNotFound when it is not, or when
// another transaction holds it: that one is expiring or changing it.
func LockDueForExpiry(ctx context.Context, db DB, k FlowKey, now time.Time) (Flow, error) {
	return flowRows.one(db.Query(ctx, `select `+flowColumns+` from flows
		where organization_id = $1 and id = $2 and process_status = 'active' and expires_at <= $3
		for update skip locked`, k.OrganizationID, k.ID, now))
}

// ExpireAcceptance moves a flow of organizationID from Accepted to Expired
// when its valid_until has passed by the database's clock, bumps its version
// and returns it. The update's own row lock and condition make a second call,
// concurrent or later, change nothing: it is database.ErrNotFound, as is a flow that is
// gone, not accepted or not yet due.
func ExpireAcceptance(ctx context.Context, db DB, organizationID, id string) (Flow, error) {
	return flowRows.one(db.Query(ctx, `update flows set consent_status = 'Expired', expired_at = now(),
		version = version + 1, updated_at = greatest(now(), updated_at)
		where organization_id = $1 and id = $2 and consent_status = 'Accepted' and valid_until <= now()
		returning `+flowColumns, organizationID, id))
}
