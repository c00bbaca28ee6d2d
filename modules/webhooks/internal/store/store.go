// Package store holds the webhooks module's SQL: signing secrets, the outbox of
// events and their delivery attempts. Only the webhooks module imports it.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Event states.
const (
	Pending   = "pending"
	Delivered = "delivered"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// StoredEvent is a row of events: one change of a flow, or of an endpoint,
// delivered or not.
type StoredEvent struct {
	ID             string
	OrganizationID string
	FlowID         string // empty (null) for an event of no flow
	Sequence       int    // 0 (null) for an event of no flow
	Type           string
	Body           string
	CreatedAt      time.Time
	// Test marks an event a person sent to try one endpoint: it names no
	// flow and goes to no other destination.
	Test bool
}

// Event is a row of webhook_events: the delivery of an event to one URL.
// Its ID is the delivery's; EventID is the event's, the webhook-id.
type Event struct {
	ID             string
	EventID        string
	OrganizationID string
	FlowID         string
	TaskID         string
	Type           string
	URL            string
	Body           string
	State          string
	LastError      string
	JobID          int64
	// Signing and Payload are the endpoint's (symmetric and full for a
	// flow's own URL); SigningChangedAt is when its signing last changed.
	// GetEventAndSecrets alone reads them, and Policy.
	Signing, Payload string
	SigningChangedAt *time.Time
	Policy           Policy
}

// Target is an organization endpoint an event fans out to.
type Target struct {
	EndpointID, URL string
}

// matchingTargets selects the enabled endpoints of organization $1 that
// subscribe to event type $2, oldest first.
const matchingTargets = `select id::text, url from webhook_endpoints
	where organization_id = $1 and enabled and (cardinality(event_types) = 0 or $2 = any (event_types))
	order by created_at, id`

// InsertEvent stores an event and, unless delivery is nil, its pending
// delivery to the flow's URL, and returns the organization's endpoints the
// event goes to as well: all in one statement, so that an event costs one
// round trip when no endpoint wants it.
func InsertEvent(ctx context.Context, db database.Querier, ev StoredEvent, delivery *Event) ([]Target, error) {
	var rows pgx.Rows
	var err error
	if delivery == nil {
		rows, err = db.Query(ctx, `
			with event as (
				insert into events (organization_id, id, flow_id, sequence, type, body)
				values ($1, $3, nullif($4, ''), nullif($5::integer, 0), $2, $6))
			`+matchingTargets, ev.OrganizationID, ev.Type, ev.ID, ev.FlowID, ev.Sequence, ev.Body)
	} else {
		e := delivery
		rows, err = db.Query(ctx, `
			with event as (
				insert into events (organization_id, id, flow_id, sequence, type, body) values ($1, $9, $4, $10, $2, $7)),
			delivery as (
				insert into webhook_events (id, organization_id, flow_id, task_id, type, url, body, job_id, event_id)
				values ($3, $1, $4, $5, $2, $6, $7, $8, $9))
			`+matchingTargets,
			e.OrganizationID, e.Type, e.ID, e.FlowID, e.TaskID, e.URL, e.Body, e.JobID, ev.ID, ev.Sequence)
	}
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Target, error) {
		var t Target
		err := r.Scan(&t.EndpointID, &t.URL)
		return t, err
	})
}

// InsertDeliveries stores pending deliveries of one event to endpoints, one
// per element of ids, endpoints, urls and jobs, in one statement.
func InsertDeliveries(ctx context.Context, db database.Querier, ev StoredEvent, ids, endpoints, urls []string, jobs []int64) error {
	_, err := db.Exec(ctx, `
		insert into webhook_events (id, organization_id, flow_id, task_id, type, url, body, job_id, event_id, endpoint_id)
		select d.id, $1, $2, '', $3, d.url, $4, d.job, $5, d.endpoint
		from unnest($6::uuid[], $7::text[], $8::bigint[], $9::uuid[]) as d(id, url, job, endpoint)`,
		ev.OrganizationID, ev.FlowID, ev.Type, ev.Body, ev.ID, ids, urls, jobs, endpoints)
	return err
}

// GetStoredEvent returns one of an organization's events, locked against
// a concurrent redelivery when forUpdate. database.ErrNotFound.
func GetStoredEvent(ctx context.Context, db database.Querier, organizationID, id string, forUpdate bool) (StoredEvent, error) {
	q := `select ` + storedEventColumns + ` from events
		where organization_id = $1 and id = $2`
	if forUpdate {
		q += ` for update`
	}
	rows, err := db.Query(ctx, q, organizationID, id)
	if err != nil {
		return StoredEvent{}, err
	}
	ev, err := pgx.CollectExactlyOneRow(rows, scanStoredEvent)
	if errors.Is(err, pgx.ErrNoRows) {
		return StoredEvent{}, database.ErrNotFound
	}
	return ev, err
}

// ResetDeliveries makes an event's deliveries pending again, those to
// endpointID only when it is not empty, and returns them; cancelled ones
// (of a deleted flow) stay cancelled.
func ResetDeliveries(ctx context.Context, db database.Querier, organizationID, eventID, endpointID string) ([]Event, error) {
	rows, err := db.Query(ctx, `
		update webhook_events set state = 'pending', finished_at = null
		where organization_id = $1 and event_id = $2 and state <> 'cancelled'
		  and ($3 = '' or endpoint_id::text = $3)
		returning id::text, event_id::text, organization_id, flow_id, task_id, type, url, body, state, last_error, job_id`,
		organizationID, eventID, endpointID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.ID, &e.EventID, &e.OrganizationID, &e.FlowID, &e.TaskID, &e.Type, &e.URL, &e.Body, &e.State, &e.LastError, &e.JobID)
		return e, err
	})
}

// HasDelivery reports whether an organization's event has a delivery to
// the endpoint, in any state.
func HasDelivery(ctx context.Context, db database.Querier, organizationID, eventID, endpointID string) (bool, error) {
	var had bool
	err := db.QueryRow(ctx, `select exists (select from webhook_events
		where organization_id = $1 and endpoint_id = $2 and event_id = $3)`, organizationID, endpointID, eventID).Scan(&had)
	return had, err
}

// GetEventAndSecrets returns one of an organization's deliveries, with its
// Policy, and the organization's signing secrets, in one query: a delivery
// needs all of them. The secrets are nil when the organization has none yet. database.ErrNotFound when the
// delivery does not exist.
func GetEventAndSecrets(ctx context.Context, db database.Querier, organizationID, id string) (Event, *Secrets, error) {
	var e Event
	var cur, prev *string
	var createdAt, prevExp *time.Time
	var rate *int
	err := db.QueryRow(ctx, `
		select d.id::text, d.event_id::text, d.organization_id, d.flow_id, d.task_id, d.type, d.url, d.body, d.state, d.last_error, d.job_id,
			s.secret, s.created_at,
			case when s.previous_expires_at > now() then s.previous_secret end,
			case when s.previous_expires_at > now() then s.previous_expires_at end,
			coalesce(w.signing, 'symmetric'), coalesce(w.payload, 'full'), w.signing_changed_at, `+policyColumns+`
		from webhook_events d left join webhook_secrets s on s.organization_id = d.organization_id
		`+policyJoins+`
		where d.organization_id = $1 and d.id = $2`, organizationID, id).
		Scan(append([]any{&e.ID, &e.EventID, &e.OrganizationID, &e.FlowID, &e.TaskID, &e.Type, &e.URL, &e.Body, &e.State, &e.LastError, &e.JobID,
			&cur, &createdAt, &prev, &prevExp, &e.Signing, &e.Payload, &e.SigningChangedAt}, e.Policy.targets(&rate)...)...)
	if rate != nil {
		e.Policy.RateLimit = *rate
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Event{}, nil, database.ErrNotFound
	}
	if err != nil || cur == nil || createdAt == nil {
		return e, nil, err
	}
	s := &Secrets{Current: *cur, CreatedAt: *createdAt}
	if prev != nil && prevExp != nil {
		s.Previous, s.PreviousExpires = *prev, *prevExp
	}
	return e, s, nil
}

// DeliveryOrganization returns the organization of a delivery found by its
// id alone: a job queued by an instance older than migration 022 names no
// organization. It reads every row (on Citus, every shard), as no index
// holds the id alone; such jobs are rare and short-lived. database.ErrNotFound.
func DeliveryOrganization(ctx context.Context, db database.Querier, id string) (string, error) {
	var org string
	err := db.QueryRow(ctx, `select organization_id from webhook_events where id = $1`, id).Scan(&org)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", database.ErrNotFound
	}
	return org, err
}

// CancelPending marks an organization's flow's pending events cancelled,
// except flow.deleted, and returns the ids of their jobs.
func CancelPending(ctx context.Context, db database.Querier, organizationID, flowID string) ([]int64, error) {
	rows, err := db.Query(ctx, `
		update webhook_events set state = 'cancelled', finished_at = now()
		where organization_id = $1 and flow_id = $2 and state = 'pending' and type <> 'flow.deleted'
		returning job_id`, organizationID, flowID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// Attempt is one delivery attempt to record.
type Attempt struct {
	OrganizationID string
	// EventID is the delivery's id.
	EventID    string
	At         time.Time
	StatusCode int
	Error      string // empty on success
	Latency    time.Duration
}

// Recorded is what RecordAttempt leaves behind.
type Recorded struct {
	// State is the delivery's state afterwards.
	State string
	// EndpointID is the delivery's endpoint; empty for a flow's own URL.
	EndpointID string
	// FailingFor is how long the endpoint has failed without a success,
	// this attempt included, when the attempt failed and the endpoint is
	// enabled; nil otherwise.
	FailingFor *time.Duration
}

// RecordAttempt stores a and moves the delivery to state (with lastError)
// if it is still pending, so that a delivery cancelled meanwhile stays
// cancelled and the caller can tell; a delivery that leaves pending
// finishes at now. The delivery's endpoint, if it has one, keeps the health
// it is disabled by: a failure starts its failing_since unless it is failing
// already, a success clears it.
func RecordAttempt(ctx context.Context, db database.Querier, a Attempt, state, lastError string, now time.Time) (Recorded, error) {
	// One statement, so one round trip: the attempt's insert and the
	// endpoint's update run as data-modifying CTEs beside the delivery's
	// update. Each names the organization: Citus runs such a statement only
	// on one node, the organization's. The time is a parameter, as Citus
	// refuses now() in a CASE of a write. The endpoint is written only when
	// its health changes, so a healthy endpoint's successes cost a read of
	// its row. The endpoint CTE reads the row as it was, hence the coalesce
	// with this attempt's time.
	var r Recorded
	var seconds *float64
	err := db.QueryRow(ctx, `
		with attempt as (
			insert into webhook_attempts (organization_id, event_id, attempted_at, status_code, error, latency_us)
			values ($9, $1, $4, $5, $6, $7)),
		delivery as (
			update webhook_events set
				state = case when state = 'pending' then $2 else state end,
				last_error = case when state = 'pending' then $3 else last_error end,
				finished_at = case when state = 'pending' and $2 <> 'pending' then $10::timestamptz else finished_at end
			where organization_id = $9 and id = $1
			returning state, endpoint_id),
		endpoint as (
			select w.enabled, w.failing_since from webhook_endpoints w join delivery d
			on w.organization_id = $9 and w.id = d.endpoint_id),
		health as (
			update webhook_endpoints w set failing_since = case when $8::boolean then null else $4::timestamptz end,
				version = w.version + 1
			from delivery d
			where w.organization_id = $9 and w.id = d.endpoint_id
			  and (w.failing_since is null) = not $8::boolean)
		select d.state, coalesce(d.endpoint_id::text, ''),
			(select extract(epoch from $10::timestamptz - coalesce(e.failing_since, $4))::float8 from endpoint e where e.enabled and not $8::boolean)
		from delivery d`, a.EventID, state, lastError, a.At, a.StatusCode, a.Error, a.Latency.Microseconds(), a.Error == "",
		a.OrganizationID, now).
		Scan(&r.State, &r.EndpointID, &seconds)
	if errors.Is(err, pgx.ErrNoRows) {
		return Recorded{}, database.ErrNotFound
	}
	if seconds != nil {
		d := time.Duration(*seconds * float64(time.Second))
		r.FailingFor = &d
	}
	return r, err
}

// ResetLatestForTask makes the newest event of an organization's task pending
// again and returns it. Cancelled events (deleted flows) stay cancelled. database.ErrNotFound.
func ResetLatestForTask(ctx context.Context, db database.Querier, organizationID, taskID string) (Event, error) {
	var e Event
	err := db.QueryRow(ctx, `
		update webhook_events set state = 'pending', finished_at = null
		where organization_id = $1 and id = (
			select id from webhook_events
			where organization_id = $1 and task_id = $2 and task_id <> '' and state <> 'cancelled'
			order by created_at desc limit 1
			for update)
		returning id::text, event_id::text, organization_id, flow_id, task_id, type, url, body, state, last_error, job_id`,
		organizationID, taskID).
		Scan(&e.ID, &e.EventID, &e.OrganizationID, &e.FlowID, &e.TaskID, &e.Type, &e.URL, &e.Body, &e.State, &e.LastError, &e.JobID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Event{}, database.ErrNotFound
	}
	return e, err
}

// SetJobPriority sets a River job's priority. River keeps a job's priority
// for its retries and snoozes and has no call to change it.
func SetJobPriority(ctx context.Context, db database.Querier, jobID int64, priority int) error {
	_, err := db.Exec(ctx, `update river_job set priority = $2 where id = $1`, jobID, priority)
	return err
}

// SetJob points an organization's delivery at a new job.
func SetJob(ctx context.Context, db database.Querier, organizationID, id string, jobID int64) error {
	_, err := db.Exec(ctx, `update webhook_events set job_id = $3 where organization_id = $1 and id = $2`,
		organizationID, id, jobID)
	return err
}

// AttemptRow is an attempt with its event's type.
type AttemptRow struct {
	Attempt
	EventType string
}

// TaskEvents returns the type of the event each of a flow's delivery tasks
// delivers, by task id.
func TaskEvents(ctx context.Context, db database.Querier, organizationID, flowID string) (map[string]string, error) {
	rows, err := db.Query(ctx, `
		select distinct on (task_id) task_id, type from webhook_events
		where organization_id = $1 and flow_id = $2 and task_id <> ''
		order by task_id, created_at`, organizationID, flowID)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var taskID, eventType string
	_, err = pgx.ForEachRow(rows, []any{&taskID, &eventType}, func() error {
		out[taskID] = eventType
		return nil
	})
	return out, err
}

// Attempts lists the attempts of an organization's flow, newest first, at most limit.
func Attempts(ctx context.Context, db database.Querier, organizationID, flowID string, limit int) ([]AttemptRow, error) {
	rows, err := db.Query(ctx, `
		select a.event_id::text, e.type, a.attempted_at, a.status_code, a.error, a.latency_us
		from webhook_attempts a join webhook_events e on e.organization_id = a.organization_id and e.id = a.event_id
		where e.organization_id = $1 and a.organization_id = $1 and e.flow_id = $2
		order by a.attempted_at desc, a.id desc
		limit $3`, organizationID, flowID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (AttemptRow, error) {
		var a AttemptRow
		var us int64
		err := row.Scan(&a.EventID, &a.EventType, &a.At, &a.StatusCode, &a.Error, &us)
		a.Latency = time.Duration(us) * time.Microsecond
		return a, err
	})
}

// DeleteFinished deletes up to limit deliveries of every organization
// finished before before, with their attempts, and returns how many it
// deleted. A delivery finishes after it is created: the creation time's
// BRIN index narrows the search, and no index on the finish time keeps the
// updates of deliveries HOT. The deliveries are chosen by primary key, so
// that on Citus the choice made over every shard deletes those rows.
func DeleteFinished(ctx context.Context, db database.Querier, before time.Time, limit int) (int64, error) {
	tag, err := db.Exec(ctx, `
		delete from webhook_events where (organization_id, id) in (
			select organization_id, id from webhook_events
			where created_at < $1 and state <> 'pending' and finished_at < $1
			limit $2)`, before, limit)
	return tag.RowsAffected(), err
}

// EventQuery selects a page of an organization's events.
type EventQuery struct {
	OrganizationID string
	Type, FlowID   string
	CreatedAfter   time.Time
	CreatedBefore  time.Time
	Limit          int
	// Cursor is an event id; the page holds the events after it (older), or
	// before it (newer) when Backwards.
	Cursor    string
	Backwards bool
}

// Events returns a page of events newest first, and whether more lie
// beyond it in the page's direction. database.ErrNotFound when the cursor is not an
// event of the organization.
func Events(ctx context.Context, db database.Querier, q EventQuery) ([]StoredEvent, bool, error) {
	var after, before *time.Time
	if !q.CreatedAfter.IsZero() {
		after = &q.CreatedAfter
	}
	if !q.CreatedBefore.IsZero() {
		before = &q.CreatedBefore
	}
	var cursorAt *time.Time
	if q.Cursor != "" {
		var at time.Time
		err := db.QueryRow(ctx, `select created_at from events where organization_id = $1 and id = $2`, q.OrganizationID, q.Cursor).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, database.ErrNotFound
		}
		if err != nil {
			return nil, false, err
		}
		cursorAt = &at
	}
	cmp, order := "<", "desc"
	if q.Backwards {
		cmp, order = ">", "asc"
	}
	rows, err := db.Query(ctx, `
		select `+storedEventColumns+` from events
		where organization_id = $1
		  and ($2 = '' or type = $2)
		  and ($3 = '' or flow_id = $3)
		  and ($4::timestamptz is null or created_at >= $4)
		  and ($5::timestamptz is null or created_at < $5)
		  and ($6::timestamptz is null or (created_at, id) `+cmp+` ($6, $7::uuid))
		order by created_at `+order+`, id `+order+`
		limit $8`,
		q.OrganizationID, q.Type, q.FlowID, after, before, cursorAt, nullIfEmpty(q.Cursor), q.Limit+1)
	if err != nil {
		return nil, false, err
	}
	events, err := pgx.CollectRows(rows, scanStoredEvent)
	if err != nil {
		return nil, false, err
	}
	more := len(events) > q.Limit
	if more {
		events = events[:q.Limit]
	}
	if q.Backwards {
		for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
			events[i], events[j] = events[j], events[i]
		}
	}
	return events, more, nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// storedEventColumns are the columns scanStoredEvent reads; an event of no
// flow reads as flow "" and sequence 0.
const storedEventColumns = `id::text, organization_id, coalesce(flow_id, ''), coalesce(sequence, 0), type, body, created_at, test`

func scanStoredEvent(r pgx.CollectableRow) (StoredEvent, error) {
	var e StoredEvent
	err := r.Scan(&e.ID, &e.OrganizationID, &e.FlowID, &e.Sequence, &e.Type, &e.Body, &e.CreatedAt, &e.Test)
	return e, err
}

// DeliveryRow is a delivery of an event with its attempts.
type DeliveryRow struct {
	ID, URL, State, LastError string
	CreatedAt                 time.Time
	FinishedAt                *time.Time
	Attempts                  []Attempt
}

// EventWithDeliveries returns one of an organization's events with its
// deliveries and their attempts, oldest first. database.ErrNotFound.
func EventWithDeliveries(ctx context.Context, db database.Querier, organizationID, id string) (StoredEvent, []DeliveryRow, error) {
	rows, err := db.Query(ctx, `select `+storedEventColumns+` from events
		where organization_id = $1 and id = $2`, organizationID, id)
	if err != nil {
		return StoredEvent{}, nil, err
	}
	ev, err := pgx.CollectExactlyOneRow(rows, scanStoredEvent)
	if errors.Is(err, pgx.ErrNoRows) {
		return StoredEvent{}, nil, database.ErrNotFound
	}
	if err != nil {
		return StoredEvent{}, nil, err
	}
	rows, err = db.Query(ctx, `
		select d.id::text, d.url, d.state, d.last_error, d.created_at, d.finished_at,
			a.attempted_at, a.status_code, a.error, a.latency_us
		from webhook_events d left join webhook_attempts a on a.organization_id = d.organization_id and a.event_id = d.id
		where d.organization_id = $1 and d.event_id = $2
		order by d.created_at, d.id, a.attempted_at, a.id`, organizationID, id)
	if err != nil {
		return StoredEvent{}, nil, err
	}
	defer rows.Close()
	var out []DeliveryRow
	for rows.Next() {
		var d DeliveryRow
		var at *time.Time
		var status *int
		var msg *string
		var us *int64
		if err := rows.Scan(&d.ID, &d.URL, &d.State, &d.LastError, &d.CreatedAt, &d.FinishedAt, &at, &status, &msg, &us); err != nil {
			return StoredEvent{}, nil, err
		}
		if len(out) == 0 || out[len(out)-1].ID != d.ID {
			out = append(out, d)
		}
		if at != nil {
			last := &out[len(out)-1]
			last.Attempts = append(last.Attempts, Attempt{EventID: d.ID, At: *at, StatusCode: *status, Error: *msg,
				Latency: time.Duration(*us) * time.Microsecond})
		}
	}
	return ev, out, rows.Err()
}

// DeleteOldEvents deletes up to limit events created before before and
// returns how many it deleted.
func DeleteOldEvents(ctx context.Context, db database.Querier, before time.Time, limit int) (int64, error) {
	tag, err := db.Exec(ctx, `
		delete from events where (organization_id, id) in (
			select organization_id, id from events where created_at < $1 limit $2)`, before, limit)
	return tag.RowsAffected(), err
}
