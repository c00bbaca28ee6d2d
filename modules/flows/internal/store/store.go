// Package store is the flows module's SQL. It speaks in rows, with personal
// data still sealed; the flows package turns them into domain types.
package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoRows means the row asked for does not exist (or is not the caller's).
var ErrNoRows = errors.New("store: no rows")

// DB is a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Flow is a row of flows.
type Flow struct {
	ID                 string
	OrganizationID     string
	Number             int64
	ReferenceID        string
	ReferenceName      *string
	Version            int
	ConsentStatus      string
	ProcessStatus      string
	Sandbox            bool
	PIIKeyID           string
	NationalIDSealed   []byte
	NationalIDHMAC     []byte
	LastNameSealed     []byte
	RedirectURL        string
	WebhookURL         string
	OrganizationNumber string
	ProcessInstanceID  string
	// The pinned consent definition version, and the decision's evidence.
	FlowDefinitionID      string
	FlowDefinitionVersion int
	VersionTag            *string
	ConsentTextSHA256     []byte
	ConsentLanguage       *string
	AssuranceLevel        *string
	ACR                   *string
	ValidUntil            *time.Time
	CreatedBy             string
	HasErrors             bool
	CreatedAt             time.Time
	UpdatedAt             time.Time
	OpenedAt              *time.Time
	DecidedAt             *time.Time
	WithdrawnAt           *time.Time
	WithdrawnBy           *string
	NumAttachments        int
	ExpiresAt             time.Time
	ExpiredAt             *time.Time // when the acceptance's validity ended
}

const flowColumns = `id::text, organization_id, flow_number, reference_id, reference_name, version,
	consent_status, process_status, sandbox, pii_key_id, national_id_sealed, national_id_hmac,
	last_name_sealed, redirect_url, webhook_url, organization_number, process_instance_id::text,
	flow_definition_id, flow_definition_version, version_tag, consent_text_sha256, consent_language,
	assurance_level, acr, valid_until,
	created_by, has_errors, created_at, updated_at, opened_at, decided_at, withdrawn_at, withdrawn_by,
	num_attachments, expires_at, expired_at`

func scanFlow(row pgx.Row) (Flow, error) {
	var f Flow
	err := row.Scan(&f.ID, &f.OrganizationID, &f.Number, &f.ReferenceID, &f.ReferenceName, &f.Version,
		&f.ConsentStatus, &f.ProcessStatus, &f.Sandbox, &f.PIIKeyID, &f.NationalIDSealed, &f.NationalIDHMAC,
		&f.LastNameSealed, &f.RedirectURL, &f.WebhookURL, &f.OrganizationNumber, &f.ProcessInstanceID,
		&f.FlowDefinitionID, &f.FlowDefinitionVersion, &f.VersionTag, &f.ConsentTextSHA256, &f.ConsentLanguage,
		&f.AssuranceLevel, &f.ACR, &f.ValidUntil, &f.CreatedBy, &f.HasErrors, &f.CreatedAt, &f.UpdatedAt, &f.OpenedAt, &f.DecidedAt, &f.WithdrawnAt, &f.WithdrawnBy,
		&f.NumAttachments, &f.ExpiresAt, &f.ExpiredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, ErrNoRows
	}
	return f, err
}

// NextEventSequence counts one more event of a flow, which the caller holds
// locked, and returns its sequence number. A new flow's flow.created is 1,
// set by InsertNumberedFlow.
func NextEventSequence(ctx context.Context, db DB, organizationID, flowID string) (int, error) {
	var n int
	err := db.QueryRow(ctx, `update flows set event_sequence = event_sequence + 1
		where organization_id = $1 and id = $2 returning event_sequence`, organizationID, flowID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrNoRows
	}
	return n, err
}

// InsertNumberedFlow takes the organization's next flow number, names the
// flow prefix-number and inserts it with tasks, all in one round trip: the
// number is drawn inside the insert, and the tasks' inserts ride in the same
// batch. Like InsertFlow, it takes created_at and updated_at from the
// database clock; it fills in f.Number and f.ReferenceID too.
func InsertNumberedFlow(ctx context.Context, db DB, f *Flow, prefix string, ttl time.Duration, tasks ...*Task) error {
	var b pgx.Batch
	b.Queue(`with n as (select flowd_next_flow_number($2) as v)
		insert into flows (id, organization_id, flow_number, reference_id, reference_name,
		sandbox, pii_key_id, national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, webhook_url,
		organization_number, process_instance_id, flow_definition_id, flow_definition_version, version_tag,
		created_by, expires_at, event_sequence)
		select $1, $2, n.v, $3 || '-' || n.v, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
		now() + $18 * interval '1 microsecond', 1
		from n
		returning flow_number, reference_id, version, consent_status, process_status, created_at, updated_at, expires_at`,
		f.ID, f.OrganizationID, prefix, f.ReferenceName, f.Sandbox, f.PIIKeyID,
		f.NationalIDSealed, f.NationalIDHMAC, f.LastNameSealed, f.RedirectURL, f.WebhookURL,
		f.OrganizationNumber, f.ProcessInstanceID, f.FlowDefinitionID, f.FlowDefinitionVersion, f.VersionTag,
		f.CreatedBy, ttl.Microseconds())
	for _, t := range tasks {
		b.Queue(insertTaskSQL, t.OrganizationID, t.ID, t.FlowID, t.TaskType, t.TaskCategory, t.Status)
	}
	br := db.SendBatch(ctx, &b)
	defer br.Close()
	err := br.QueryRow().Scan(&f.Number, &f.ReferenceID, &f.Version, &f.ConsentStatus, &f.ProcessStatus,
		&f.CreatedAt, &f.UpdatedAt, &f.ExpiresAt)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if err := br.QueryRow().Scan(&t.CreatedAt, &t.UpdatedAt); err != nil {
			return err
		}
	}
	return br.Close()
}

const flowByIDSQL = `select ` + flowColumns + ` from flows where organization_id = $1 and id = $2`

// GetFlow returns a flow of organizationID, locked for update when lock is
// set. ErrNoRows.
func GetFlow(ctx context.Context, db DB, organizationID, id string, lock bool) (Flow, error) {
	q := flowByIDSQL
	if lock {
		q += ` for update`
	}
	return scanFlow(db.QueryRow(ctx, q, organizationID, id))
}

// SaveState writes f's state and its decision's evidence, bumps its version
// and updated_at, and reads both back into f.
func SaveState(ctx context.Context, db DB, f *Flow) error {
	err := db.QueryRow(ctx, `update flows set consent_status = $2, process_status = $3, opened_at = $4,
		decided_at = $5, has_errors = $6, consent_text_sha256 = $7, consent_language = $8, assurance_level = $9,
		acr = $10, valid_until = $11, withdrawn_at = $12, withdrawn_by = $13, version = version + 1,
		updated_at = greatest(now(), updated_at)
		where id = $1 and organization_id = $14 returning version, updated_at`,
		f.ID, f.ConsentStatus, f.ProcessStatus, f.OpenedAt, f.DecidedAt, f.HasErrors, f.ConsentTextSHA256,
		f.ConsentLanguage, f.AssuranceLevel, f.ACR, f.ValidUntil, f.WithdrawnAt, f.WithdrawnBy, f.OrganizationID).Scan(&f.Version, &f.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNoRows
	}
	return err
}

// FlowSummary is a flow's row as lists read it: the columns a list shows.
type FlowSummary struct {
	ID               string
	OrganizationID   string
	Number           int64
	ReferenceID      string
	ReferenceName    string // "" when the flow has none
	ConsentStatus    string
	ProcessStatus    string
	Sandbox          bool
	FlowDefinitionID string
	PIIKeyID         string
	NationalIDSealed []byte
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// summaryColumns leave out the organization, which the query names.
const summaryColumns = `id::text, flow_number, reference_id, coalesce(reference_name, ''),
	consent_status, process_status, sandbox, flow_definition_id, pii_key_id, national_id_sealed, created_at, updated_at`

// ListQuery selects a page of an organization's flows.
type ListQuery struct {
	OrganizationID string
	Archived       bool
	ConsentStatus  string // "" for any
	Sandbox        *bool
	ReferenceID    string
	// CursorID is the flow the page starts after (Backwards false) or ends
	// before (Backwards true) in newest-first order; "" for the first page.
	CursorID  string
	Backwards bool
	Limit     int
}

// ListFlows returns one page of flows, newest first, and whether more lie
// beyond it in the direction of travel. It walks the page index from the
// cursor's position, so its cost does not grow with the page's depth; the
// page's round trip may be shared. A cursor that is not a flow of
// the organization is ErrNoRows. q's cursor must be a UUID and its texts
// valid UTF-8 without NUL.
func (s *SharedReads) ListFlows(ctx context.Context, q ListQuery) ([]FlowSummary, bool, error) {
	args := []any{q.OrganizationID, q.Archived}
	where := []string{"organization_id = $1", "archived = $2"}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if q.ConsentStatus != "" {
		where = append(where, "consent_status = "+arg(q.ConsentStatus))
	}
	if q.Sandbox != nil {
		where = append(where, "sandbox = "+arg(*q.Sandbox))
	}
	if q.ReferenceID != "" {
		where = append(where, "reference_id = "+arg(q.ReferenceID))
	}
	// flows.id, not id: an ORDER BY name means the output column first, and
	// the output id is text, which the page index cannot give in order.
	order := "created_at desc, flows.id desc"
	if q.CursorID != "" {
		// The cursor's position is found by primary key inside the page's
		// statement, so a page costs one round trip. A cursor that is not a
		// flow of the organization makes the comparison null and the page
		// empty; only an empty page asks, below, which of the two it is.
		cmp := "<"
		if q.Backwards {
			cmp = ">"
			order = "created_at asc, flows.id asc"
		}
		c := arg(q.CursorID)
		where = append(where, fmt.Sprintf("(created_at, id) %s ((select created_at from flows where organization_id = $1 and id = %s), %s)", cmp, c, c))
	}
	// The limit is written into the statement, not bound: with "limit $n"
	// PostgreSQL's generic plan guesses a tenth of the table, so it plans
	// every execution anew; with the number in the text each page size gets
	// its own cached generic plan.
	sql := `select ` + summaryColumns + ` from flows where ` + strings.Join(where, " and ") +
		` order by ` + order + ` limit ` + strconv.Itoa(q.Limit+1)
	var out []FlowSummary
	err := s.Do(ctx, func(b *pgx.Batch) { b.Queue(sql, args...) }, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		// One row and one list of destinations serve the page: fresh
		// pointers for each Scan would move each row to the heap.
		f := FlowSummary{OrganizationID: q.OrganizationID}
		dest := []any{&f.ID, &f.Number, &f.ReferenceID, &f.ReferenceName, &f.ConsentStatus, &f.ProcessStatus,
			&f.Sandbox, &f.FlowDefinitionID, &f.PIIKeyID, &f.NationalIDSealed, &f.CreatedAt, &f.UpdatedAt}
		out = make([]FlowSummary, 0, q.Limit+1)
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			out = append(out, f)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, false, err
	}
	if len(out) == 0 && q.CursorID != "" {
		var found bool
		if err := s.db.QueryRow(ctx, `select exists (select from flows where organization_id = $1 and id = $2)`,
			q.OrganizationID, q.CursorID).Scan(&found); err != nil {
			return nil, false, err
		}
		if !found {
			return nil, false, ErrNoRows
		}
	}
	more := len(out) > q.Limit
	if more {
		out = out[:q.Limit]
	}
	if q.Backwards {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, more, nil
}

// FlowKey names a flow of any organization.
type FlowKey struct{ OrganizationID, ID string }

func collectKeys(rows pgx.Rows, err error) ([]FlowKey, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (FlowKey, error) {
		var k FlowKey
		return k, r.Scan(&k.OrganizationID, &k.ID)
	})
}

// DueForExpiry returns up to limit active flows whose consent expired by
// now, of every organization. It locks nothing: a statement over every
// organization's rows cannot lock them on Citus, so the caller locks each
// with LockDueForExpiry.
func DueForExpiry(ctx context.Context, db DB, now time.Time, limit int) ([]FlowKey, error) {
	return collectKeys(db.Query(ctx, `select organization_id, id::text from flows
		where process_status = 'active' and expires_at <= $1 order by expires_at limit $2`, now, limit))
}

// LockDueForExpiry returns a flow DueForExpiry found, locked for update, when
// it is still active and expired by now. ErrNoRows when it is not, or when
// another transaction holds it: that one is expiring or changing it.
func LockDueForExpiry(ctx context.Context, db DB, k FlowKey, now time.Time) (Flow, error) {
	return scanFlow(db.QueryRow(ctx, `select `+flowColumns+` from flows
		where organization_id = $1 and id = $2 and process_status = 'active' and expires_at <= $3
		for update skip locked`, k.OrganizationID, k.ID, now))
}

// ExpireAcceptance moves a flow of organizationID from Accepted to Expired
// when its valid_until has passed by the database's clock, bumps its version
// and returns it. The update's own row lock and condition make a second call,
// concurrent or later, change nothing: it is ErrNoRows, as is a flow that is
// gone, not accepted or not yet due.
func ExpireAcceptance(ctx context.Context, db DB, organizationID, id string) (Flow, error) {
	return scanFlow(db.QueryRow(ctx, `update flows set consent_status = 'Expired', expired_at = now(),
		version = version + 1, updated_at = greatest(now(), updated_at)
		where id = $1 and organization_id = $2 and consent_status = 'Accepted' and valid_until <= now()
		returning `+flowColumns, id, organizationID))
}

// DueAcceptances returns up to limit acceptances of every organization
// whose valid_until has passed. It locks nothing (see DueForExpiry):
// ExpireAcceptance decides on each.
func DueAcceptances(ctx context.Context, db DB, limit int) ([]FlowKey, error) {
	return collectKeys(db.Query(ctx, `select organization_id, id::text from flows
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

// Task is a row of flow_tasks.
type Task struct {
	OrganizationID, ID, FlowID, TaskType, TaskCategory, Status string
	CreatedAt, UpdatedAt                                       time.Time
}

// InsertTask inserts t with the database clock's time.
func InsertTask(ctx context.Context, db DB, t *Task) error {
	return db.QueryRow(ctx, insertTaskSQL,
		t.OrganizationID, t.ID, t.FlowID, t.TaskType, t.TaskCategory, t.Status).Scan(&t.CreatedAt, &t.UpdatedAt)
}

const insertTaskSQL = `insert into flow_tasks (organization_id, id, flow_id, task_type, task_category, status)
		values ($1, $2, $3, $4, $5, $6) returning created_at, updated_at`

const taskColumns = `organization_id, id::text, flow_id::text, task_type, task_category, status, created_at, updated_at`

func scanTask(row pgx.Row) (Task, error) {
	var t Task
	err := row.Scan(&t.OrganizationID, &t.ID, &t.FlowID, &t.TaskType, &t.TaskCategory, &t.Status, &t.CreatedAt, &t.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrNoRows
	}
	return t, err
}

// Tasks lists a flow's tasks, oldest first.
func Tasks(ctx context.Context, db DB, organizationID, flowID string) ([]Task, error) {
	rows, err := db.Query(ctx, `select `+taskColumns+`
		from flow_tasks where organization_id = $1 and flow_id = $2 order by created_at, id`, organizationID, flowID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Task, error) { return scanTask(r) })
}

// GetTask returns an organization's task. ErrNoRows.
func GetTask(ctx context.Context, db DB, organizationID, id string) (Task, error) {
	return scanTask(db.QueryRow(ctx, `select `+taskColumns+` from flow_tasks where organization_id = $1 and id = $2`,
		organizationID, id))
}

// SetTaskStatus moves a task to status.
func SetTaskStatus(ctx context.Context, db DB, organizationID, id, status string) error {
	_, err := db.Exec(ctx, `update flow_tasks set status = $3, updated_at = now()
		where organization_id = $1 and id = $2 and status <> $3`, organizationID, id, status)
	return err
}

// CompleteCleanTask completes an organization's task that is not completed
// yet when it has no open incident and its flow has no errors, the case in
// which completing it changes nothing else about the flow; it reports
// whether it did. Every table it reads is named by the organization, so
// that on Citus the statement runs on the organization's node.
func CompleteCleanTask(ctx context.Context, db DB, organizationID, id string) (bool, error) {
	tag, err := db.Exec(ctx, `update flow_tasks t set status = 'completed', updated_at = now()
		where t.organization_id = $1 and t.id = $2 and t.status <> 'completed'
		and not exists (select 1 from flow_incidents i
			where i.organization_id = $1 and i.task_id = t.id and i.resolved_at is null)
		and not exists (select 1 from flows f
			where f.organization_id = $1 and f.id = t.flow_id and f.has_errors)
		and not exists (select 1 from flow_tasks o
			where o.organization_id = $1 and o.flow_id = t.flow_id and o.status = 'failed')`, organizationID, id)
	return tag.RowsAffected() == 1, err
}

// SetTasksStatus moves a flow's tasks of taskType from one status to another.
func SetTasksStatus(ctx context.Context, db DB, organizationID, flowID, taskType, from, to string) error {
	_, err := db.Exec(ctx, `update flow_tasks set status = $5, updated_at = now()
		where organization_id = $1 and flow_id = $2 and task_type = $3 and status = $4`,
		organizationID, flowID, taskType, from, to)
	return err
}

// AnyTaskFailed reports whether a task of the flow failed for good.
func AnyTaskFailed(ctx context.Context, db DB, organizationID, flowID string) (bool, error) {
	var failed bool
	err := db.QueryRow(ctx, `select exists (select 1 from flow_tasks
		where organization_id = $1 and flow_id = $2 and status = 'failed')`, organizationID, flowID).Scan(&failed)
	return failed, err
}

// Incident is an open row of flow_incidents.
type Incident struct {
	OrganizationID, ID, FlowID, TaskID, TaskType, Message string
	OpenedAt                                              time.Time
}

// OpenIncident opens inc unless its task has an open one; it reports whether it did.
func OpenIncident(ctx context.Context, db DB, inc Incident) (bool, error) {
	tag, err := db.Exec(ctx, `insert into flow_incidents (organization_id, id, flow_id, task_id, task_type, message)
		values ($1, $2, $3, $4, $5, $6) on conflict (organization_id, task_id) where resolved_at is null do nothing`,
		inc.OrganizationID, inc.ID, inc.FlowID, inc.TaskID, inc.TaskType, inc.Message)
	return tag.RowsAffected() == 1, err
}

// ResolveIncidents resolves a task's open incident and reports whether there was one.
func ResolveIncidents(ctx context.Context, db DB, organizationID, taskID string) (bool, error) {
	tag, err := db.Exec(ctx, `update flow_incidents set resolved_at = now()
		where organization_id = $1 and task_id = $2 and resolved_at is null`, organizationID, taskID)
	return tag.RowsAffected() > 0, err
}

// OpenIncidents lists the open incidents of an organization's flowIDs, oldest first.
func OpenIncidents(ctx context.Context, db DB, organizationID string, flowIDs []string) ([]Incident, error) {
	rows, err := db.Query(ctx, openIncidentsSQL, organizationID, flowIDs)
	if err != nil {
		return nil, err
	}
	return collectIncidents(rows)
}

// openIncidentsSQL takes the flow ids as text[]: pgx writes a []string as
// text[] directly, while as uuid[] it first fails a binary encoding and
// builds an error for every element on each call.
const openIncidentsSQL = `select organization_id, id::text, flow_id::text, task_id::text, task_type, message, opened_at
		from flow_incidents where organization_id = $1 and flow_id = any($2::text[]::uuid[]) and resolved_at is null
		order by opened_at, id`

func collectIncidents(rows pgx.Rows) ([]Incident, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Incident, error) {
		var i Incident
		err := r.Scan(&i.OrganizationID, &i.ID, &i.FlowID, &i.TaskID, &i.TaskType, &i.Message, &i.OpenedAt)
		return i, err
	})
}

// IdempotencyKey is a row of flow_idempotency_keys.
type IdempotencyKey struct {
	OrganizationID string
	Key            string
	RequestHash    []byte
	FlowID         string
	ReferenceID    string
	PIIKeyID       string
	ConsentSealed  []byte
}

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

// GetKey returns the unexpired row of a key. ErrNoRows.
func GetKey(ctx context.Context, db DB, organizationID, key string) (IdempotencyKey, error) {
	k := IdempotencyKey{OrganizationID: organizationID, Key: key}
	err := db.QueryRow(ctx, `select request_hash, flow_id::text, reference_id, pii_key_id, consent_sealed
		from flow_idempotency_keys where organization_id = $1 and key = $2 and expires_at > now()`,
		organizationID, key).Scan(&k.RequestHash, &k.FlowID, &k.ReferenceID, &k.PIIKeyID, &k.ConsentSealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, ErrNoRows
	}
	return k, err
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
	OrganizationID, FlowID, ReferenceID, DeletedBy string
	ReceiptIDs                                     []string
	DeletedAt                                      time.Time
	ID                                             int64
}

// InsertDeletion logs a deletion.
func InsertDeletion(ctx context.Context, db DB, d *Deletion) error {
	if d.ReceiptIDs == nil {
		d.ReceiptIDs = []string{}
	}
	return db.QueryRow(ctx, `insert into flow_deletions (organization_id, flow_id, reference_id, deleted_by, receipt_ids)
		values ($1, $2, $3, $4, $5::text[]::uuid[]) returning id, deleted_at`,
		d.OrganizationID, d.FlowID, d.ReferenceID, d.DeletedBy, d.ReceiptIDs).Scan(&d.ID, &d.DeletedAt)
}

// Deletions lists an organization's deletion log newest first, starting after
// the entry of flow before ("" for the first page), limit+1 rows at most.
func Deletions(ctx context.Context, db DB, organizationID string, limit int, before string) ([]Deletion, error) {
	rows, err := db.Query(ctx, `select id, organization_id, flow_id::text, reference_id, deleted_by, receipt_ids::text[], deleted_at
		from flow_deletions where organization_id = $1 and ($3 = '' or (deleted_at, id) < (
			select deleted_at, id from flow_deletions where organization_id = $1 and flow_id::text = $3
			order by id desc limit 1))
		order by deleted_at desc, id desc limit $2`, organizationID, limit+1, before)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Deletion, error) {
		var d Deletion
		err := r.Scan(&d.ID, &d.OrganizationID, &d.FlowID, &d.ReferenceID, &d.DeletedBy, &d.ReceiptIDs, &d.DeletedAt)
		return d, err
	})
}

// Attachment is a row of flow_attachments.
type Attachment struct {
	OrganizationID, ID, FlowID, Kind, ContentType, Body string
	CreatedAt                                           time.Time
}

// InsertAttachment stores a and counts it in its flow's num_attachments,
// in one statement; created_at is the database clock's.
func InsertAttachment(ctx context.Context, db DB, a *Attachment) error {
	return db.QueryRow(ctx, `with counted as (
			update flows set num_attachments = num_attachments + 1 where organization_id = $1 and id = $3)
		insert into flow_attachments (organization_id, id, flow_id, kind, content_type, body)
		values ($1, $2, $3, $4, $5, $6) returning created_at`,
		a.OrganizationID, a.ID, a.FlowID, a.Kind, a.ContentType, a.Body).Scan(&a.CreatedAt)
}

// Attachments lists a flow's attachments, oldest first, with their bodies
// when withBody is set.
func Attachments(ctx context.Context, db DB, organizationID, flowID string, withBody bool) ([]Attachment, error) {
	rows, err := db.Query(ctx, `select organization_id, id::text, flow_id::text, kind, content_type,
		case when $3 then body else '' end, created_at
		from flow_attachments where organization_id = $1 and flow_id = $2 order by created_at, id`,
		organizationID, flowID, withBody)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attachment, error) {
		var a Attachment
		err := r.Scan(&a.OrganizationID, &a.ID, &a.FlowID, &a.Kind, &a.ContentType, &a.Body, &a.CreatedAt)
		return a, err
	})
}

// GetAttachment returns one of a flow's attachments with its body. ErrNoRows.
func GetAttachment(ctx context.Context, db DB, organizationID, flowID, id string) (Attachment, error) {
	var a Attachment
	err := db.QueryRow(ctx, `select organization_id, id::text, flow_id::text, kind, content_type, body, created_at
		from flow_attachments where organization_id = $1 and flow_id = $2 and id = $3`,
		organizationID, flowID, id).Scan(&a.OrganizationID, &a.ID, &a.FlowID, &a.Kind, &a.ContentType, &a.Body, &a.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, ErrNoRows
	}
	return a, err
}

// DeleteAttachments removes a flow's attachments and returns their ids.
func DeleteAttachments(ctx context.Context, db DB, organizationID, flowID string) ([]string, error) {
	rows, err := db.Query(ctx, `delete from flow_attachments where organization_id = $1 and flow_id = $2 returning id::text`,
		organizationID, flowID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
