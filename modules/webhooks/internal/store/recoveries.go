package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Recovery is a row of webhook_recoveries.
type Recovery struct {
	OrganizationID string
	ID             string
	EndpointID     string // empty (null) for a recovery of the flows' own URLs
	Host           string // of a recovery of the flows' own URLs: the host it covers; empty: every one
	Since          time.Time
	State          string
	Total          int
	Scheduled      int
	RequestedBy    string
	CreatedAt      time.Time
	StartedAt      *time.Time
	FinishedAt     *time.Time
	Error          string
}

// Recovery states.
const (
	RecoveryQueued  = "queued"
	RecoveryRunning = "running"
	RecoveryDone    = "done"
	RecoveryFailed  = "failed"
)

// Unique indexes that hold an endpoint, and the flows' own URLs of an
// organization, to one queued or running recovery.
const (
	RecoveryActiveIndex         = "webhook_recoveries_active"
	RecoveryFlowURLsActiveIndex = "webhook_recoveries_flow_urls_active"
)

const recoveryColumns = `r.organization_id, r.id::text, coalesce(r.endpoint_id::text, ''), r.host, r.since, r.state, r.total,
	r.scheduled, r.requested_by, r.created_at, r.started_at, r.finished_at, r.error`

func scanRecovery(row pgx.Row, more ...any) (Recovery, error) {
	var r Recovery
	err := row.Scan(append([]any{&r.OrganizationID, &r.ID, &r.EndpointID, &r.Host, &r.Since, &r.State, &r.Total, &r.Scheduled,
		&r.RequestedBy, &r.CreatedAt, &r.StartedAt, &r.FinishedAt, &r.Error}, more...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, database.ErrNotFound
	}
	return r, err
}

// Scope is what a recovery covers of the events in its window: of an
// endpoint, the events of its types whose delivery to it failed, and those
// it never had a delivery of (it was disabled then) from MissedFrom on; of
// the flows' own URLs, the events whose delivery to the flow's URL failed,
// to Host's URLs only when it is set. Neither sends an event of a deleted
// flow again, but its flow.deleted.
type Scope struct {
	EndpointID string   // empty: the flows' own URLs
	Types      []string // the endpoint's event types; empty: every one
	// MissedFrom is the oldest event without a delivery to the endpoint
	// that is sent: one older came before the endpoint, or before the
	// oldest delivery kept, which could have been its delivery.
	MissedFrom time.Time
	Host       string // lower case
}

// args are the scope's query arguments, with the organization's.
func (s Scope) args(organizationID string) pgx.NamedArgs {
	a := pgx.NamedArgs{"org": organizationID, "host": s.Host}
	if s.EndpointID != "" {
		a["endpoint"], a["types"], a["missedFrom"] = s.EndpointID, s.Types, s.MissedFrom
	}
	return a
}

// sql returns the joins of an event e with the delivery d of it that the
// scope covers, if it has one, and with g, whether its flow was deleted;
// and the condition under which a recovery sends e. The delivery to a
// flow's own URL has its event's id; the one to an endpoint is found by
// webhook_events_endpoint_event. The flow's flow.deleted is looked up by
// events_flow, one flow at a time (lateral): a plan that read every
// flow.deleted of the organization for each batch would cost a batch as
// much as the organization's events.
func (s Scope) sql() (joins, send string) {
	const deleted = `
		left join lateral (select true as deleted from events x
			where x.organization_id = @org and x.flow_id = e.flow_id and x.type = 'flow.deleted' and e.type <> 'flow.deleted'
			limit 1) g on true`
	if s.EndpointID == "" {
		return `left join webhook_events d on d.organization_id = @org and d.id = e.id and d.endpoint_id is null` + deleted,
			`d.state = 'failed' and (@host = '' or lower(substring(d.url from '^[^:/?#]+://([^/?#]*)')) = @host) and g.deleted is null`
	}
	return `left join webhook_events d on d.organization_id = @org and d.endpoint_id = @endpoint::uuid and d.event_id = e.id` + deleted,
		`not e.test and (cardinality(@types::text[]) = 0 or e.type = any (@types::text[]))
		and (d.state = 'failed' or (d.id is null and e.created_at >= @missedFrom::timestamptz)) and g.deleted is null`
}

// NewRecovery is a recovery to store.
type NewRecovery struct {
	OrganizationID, ID string
	Scope              Scope
	Since              time.Time
	RequestedBy        string
}

// InsertRecovery stores a queued recovery of what its scope covers from
// since to now (the recovery's created_at), counted in the same statement,
// and returns it. A second active recovery of the endpoint violates
// RecoveryActiveIndex, of the flows' own URLs RecoveryFlowURLsActiveIndex.
func InsertRecovery(ctx context.Context, db database.Querier, n NewRecovery) (Recovery, error) {
	joins, send := n.Scope.sql()
	args := n.Scope.args(n.OrganizationID)
	args["id"], args["since"], args["requestedBy"], args["endpointID"] = n.ID, n.Since, n.RequestedBy, n.Scope.EndpointID
	return scanRecovery(db.QueryRow(ctx, `
		with covered as (
			select count(*)::int as n from events e `+joins+`
			where e.organization_id = @org and e.created_at >= @since and e.created_at <= now() and `+send+`)
		insert into webhook_recoveries as r (organization_id, id, endpoint_id, host, since, total, requested_by)
		select @org, @id, nullif(@endpointID::text, '')::uuid, @host, @since, n, @requestedBy from covered
		returning `+recoveryColumns, args))
}

// endpointIs is the condition on a recovery r of the endpoint, or of the
// flows' own URLs when endpointID is empty, with the endpoint as $2.
func endpointIs(endpointID string) string {
	if endpointID == "" {
		return `r.endpoint_id is null and $2 = ''`
	}
	return `r.endpoint_id = $2::uuid`
}

// GetRecovery returns one recovery of an endpoint that still exists, or
// of the flows' own URLs when endpointID is empty. database.ErrNotFound.
func GetRecovery(ctx context.Context, db database.Querier, organizationID, endpointID, id string) (Recovery, error) {
	q := `select ` + recoveryColumns + ` from webhook_recoveries r where r.organization_id = $1 and ` + endpointIs(endpointID) + ` and r.id = $3`
	if endpointID != "" {
		q += ` and exists (select from webhook_endpoints e where e.organization_id = $1 and e.id = r.endpoint_id)`
	}
	return scanRecovery(db.QueryRow(ctx, q, organizationID, endpointID, id))
}

// ListRecoveries returns up to limit of an endpoint's recoveries, or of
// the flows' own URLs when endpointID is empty, newest first.
func ListRecoveries(ctx context.Context, db database.Querier, organizationID, endpointID string, limit int) ([]Recovery, error) {
	rows, err := db.Query(ctx, `select `+recoveryColumns+` from webhook_recoveries r
		where r.organization_id = $1 and `+endpointIs(endpointID)+`
		order by r.created_at desc, r.id desc limit $3`, organizationID, endpointID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Recovery
	for rows.Next() {
		r, err := scanRecovery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RecoveryRun is what a batch of a recovery starts from: the recovery, its
// cursor, and its endpoint as it is now (nil URL when it was deleted).
type RecoveryRun struct {
	Recovery
	CursorAt          *time.Time
	CursorID          *string
	EndpointURL       *string
	EndpointEnabled   bool
	EndpointTypes     []string
	EndpointCreatedAt *time.Time
}

// LockRecovery reads a recovery and locks its row until tx ends, so that
// two runs of its job take their batches one after the other. database.ErrNotFound.
func LockRecovery(ctx context.Context, tx database.Querier, organizationID, id string) (RecoveryRun, error) {
	var r RecoveryRun
	var enabled *bool
	rec, err := scanRecovery(tx.QueryRow(ctx, `select `+recoveryColumns+`, r.cursor_created_at, r.cursor_id::text,
			e.url, e.enabled, e.event_types, e.created_at
		from webhook_recoveries r
		left join webhook_endpoints e on e.organization_id = r.organization_id and e.id = r.endpoint_id
		where r.organization_id = $1 and r.id = $2
		for update of r`, organizationID, id),
		&r.CursorAt, &r.CursorID, &r.EndpointURL, &enabled, &r.EndpointTypes, &r.EndpointCreatedAt)
	r.Recovery = rec
	r.EndpointEnabled = enabled != nil && *enabled
	return r, err
}

// Scanned is an event a batch of a recovery looked at.
type Scanned struct {
	EventID   string
	CreatedAt time.Time
	// DeliveryID is its delivery the recovery covers; nil when it has none.
	DeliveryID *string
	// Send says the recovery sends it: it makes DeliveryID pending again,
	// or adds a delivery with the event's flow, type and body.
	Send               bool
	FlowID, Type, Body string
}

// noCursor is where a recovery's first batch starts: before every event of
// its first instant (no event has the nil UUID).
const noCursor = "00000000-0000-0000-0000-000000000000"

// ScanRecovery returns up to limit of the events of a recovery's window
// that come after its cursor by (created_at, id), in that order (the order
// of the index events_page, read backwards), each with its delivery in the
// scope and whether the recovery sends it. A batch looks at as many events
// whatever it finds, so that each takes about as long.
func ScanRecovery(ctx context.Context, tx database.Querier, r RecoveryRun, s Scope, limit int) ([]Scanned, error) {
	joins, send := s.sql()
	args := s.args(r.OrganizationID)
	args["until"], args["cursorAt"], args["cursorID"], args["limit"] = r.CreatedAt, r.Since, noCursor, limit
	if r.CursorAt != nil && r.CursorID != nil {
		args["cursorAt"], args["cursorID"] = *r.CursorAt, *r.CursorID
	}
	rows, err := tx.Query(ctx, `
		with e as (
			select id, created_at, flow_id, type, body, test from events
			where organization_id = @org and created_at <= @until and (created_at, id) > (@cursorAt, @cursorID::uuid)
			order by created_at, id
			limit @limit)
		select e.id::text, e.created_at, d.id::text, coalesce(`+send+`, false),
			coalesce(e.flow_id, ''), e.type, case when d.id is null then e.body else '' end
		from e `+joins+`
		order by e.created_at, e.id`, args)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Scanned, error) {
		var e Scanned
		err := row.Scan(&e.EventID, &e.CreatedAt, &e.DeliveryID, &e.Send, &e.FlowID, &e.Type, &e.Body)
		return e, err
	})
}

// Missed is an event an endpoint never had a delivery of, and the id of
// the delivery a recovery adds.
type Missed struct {
	DeliveryID, EventID, FlowID, Type, Body string
}

// ClaimDeliveries makes the deliveries resets pending again if they are
// still failed (not sent again meanwhile), to url unless it is empty, and
// adds a pending delivery to endpointID at url of each event of missed
// that still has none (another transaction may have added one meanwhile;
// the unique index webhook_events_endpoint_event decides). It returns the
// ids of the deliveries it made pending, whose jobs are still to be made:
// job_id is 0 until the caller sets it.
func ClaimDeliveries(ctx context.Context, tx database.Querier, organizationID, endpointID, url string, resets []string, missed []Missed) ([]string, error) {
	n := len(missed)
	ids, events, flows, types, bodies := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, m := range missed {
		ids[i], events[i], flows[i], types[i], bodies[i] = m.DeliveryID, m.EventID, m.FlowID, m.Type, m.Body
	}
	rows, err := tx.Query(ctx, `
		with reset as (
			update webhook_events set state = 'pending', finished_at = null, url = coalesce(nullif(@url::text, ''), url)
			where organization_id = @org and id = any (@resets::uuid[]) and state = 'failed'
			returning id),
		added as (
			insert into webhook_events (id, organization_id, flow_id, task_id, type, url, body, job_id, event_id, endpoint_id)
			select a.id, @org, a.flow, '', a.type, @url, a.body, 0, a.event, nullif(@endpoint::text, '')::uuid
			from unnest(@ids::uuid[], @events::uuid[], @flows::text[], @types::text[], @bodies::text[]) as a(id, event, flow, type, body)
			on conflict (organization_id, endpoint_id, event_id) where endpoint_id is not null do nothing
			returning id)
		select id::text from reset union all select id::text from added`,
		pgx.NamedArgs{"org": organizationID, "endpoint": endpointID, "url": url, "resets": resets,
			"ids": ids, "events": events, "flows": flows, "types": types, "bodies": bodies})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ScheduleBatch gives the deliveries a batch claimed their jobs, and moves
// the recovery's cursor to the last event the batch looked at and its
// progress on by their number: one statement, so that the batch and the
// progress commit together. Both of its tables are named by the
// organization, so that on Citus it runs on the organization's node; least
// keeps the first start's time: on Citus, coalesce may not call now().
func ScheduleBatch(ctx context.Context, tx database.Querier, organizationID, recoveryID string, ids []string, jobs []int64, last Scanned) error {
	_, err := tx.Exec(ctx, `
		with scheduled as (
			update webhook_events e set job_id = d.job
			from unnest($3::uuid[], $4::bigint[]) as d(id, job)
			where e.organization_id = $1 and e.id = d.id
			returning 1)
		update webhook_recoveries set scheduled = scheduled + (select count(*) from scheduled),
			cursor_created_at = $5, cursor_id = $6, state = 'running', started_at = least(started_at, now())
		where organization_id = $1 and id = $2`,
		organizationID, recoveryID, ids, jobs, last.CreatedAt, last.EventID)
	return err
}

// FinishRecovery ends a recovery in state (done or failed) with message.
// A finished recovery's total becomes what it scheduled: deliveries that
// stopped failing before it reached them (sent again by hand) are not
// counted as left undone. least keeps the first start's time (see ScheduleBatch).
func FinishRecovery(ctx context.Context, db database.Querier, organizationID, id, state, message string) error {
	_, err := db.Exec(ctx, `update webhook_recoveries set state = $3, error = $4, finished_at = now(),
			started_at = least(started_at, now()),
			total = case when $3 = 'done' then scheduled else total end
		where organization_id = $1 and id = $2 and state in ('queued', 'running')`, organizationID, id, state, message)
	return err
}

// DeleteOldRecoveries deletes up to limit recoveries finished before
// before and returns how many it deleted.
func DeleteOldRecoveries(ctx context.Context, db database.Querier, before time.Time, limit int) (int64, error) {
	tag, err := db.Exec(ctx, `
		delete from webhook_recoveries where (organization_id, id) in (
			select organization_id, id from webhook_recoveries where finished_at < $1 limit $2)`, before, limit)
	return tag.RowsAffected(), err
}
