package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Policy is how a delivery goes to its endpoint: in its flow's order, at
// the endpoint's rate.
type Policy struct {
	EndpointID string // empty for a flow's own URL
	FlowID     string
	Sequence   int // 0 for an event of no flow
	// Ordered: the endpoint takes a flow's events one at a time, by sequence.
	Ordered bool
	// RateLimit is the endpoint's deliveries a second; 0 for no limit.
	RateLimit int
	// Slot is the throttle's slot the delivery took and has not used yet.
	Slot *time.Time
	// PendingBefore: when read, an earlier delivery of the flow to the
	// ordered endpoint was pending. Read without the flow's order lock, it
	// is a hint: HoldInOrder decides under the lock. Without it the
	// delivery may go, as a delivery of an earlier event cannot be stored
	// after a later one.
	PendingBefore bool
}

// InOrder reports whether the delivery waits for its flow's earlier ones.
func (p Policy) InOrder() bool {
	return p.Ordered && p.EndpointID != "" && p.FlowID != "" && p.Sequence > 0
}

// A flow's deliveries to an endpoint are found by the flow, whose few
// deliveries webhook_events_flow holds, and their endpoint is compared as
// text, which no index serves: without statistics (a table that has only
// just grown, after a deploy or in a benchmark) the planner would otherwise
// take the unique index on the organization, endpoint and event, and read
// every delivery of the endpoint for each of them.

// policyColumns select the Policy of delivery d, with its event pe_self and
// endpoint w joined as policyJoins joins them, $1 being the organization.
const policyColumns = `coalesce(d.endpoint_id::text, ''), d.flow_id, coalesce(pe_self.sequence, 0),
	coalesce(w.ordering = 'per-flow', false), w.rate_limit, d.throttle_slot,
	case when w.ordering = 'per-flow' then exists (select from webhook_events p join events pe
			on pe.organization_id = p.organization_id and pe.id = p.event_id
		where p.organization_id = $1 and p.flow_id = d.flow_id and p.endpoint_id::text = d.endpoint_id::text
		  and p.state = 'pending' and p.id <> d.id and pe.sequence < pe_self.sequence)
	else false end`

const policyJoins = `left join events pe_self on pe_self.organization_id = d.organization_id and pe_self.id = d.event_id
	left join webhook_endpoints w on w.organization_id = d.organization_id and w.id = d.endpoint_id`

// targets are where policyColumns scan to; rate takes the nullable rate
// limit, which Policy keeps as 0 for none.
func (p *Policy) targets(rate **int) []any {
	return []any{&p.EndpointID, &p.FlowID, &p.Sequence, &p.Ordered, rate, &p.Slot, &p.PendingBefore}
}

// lockFlowOrder holds, until tx ends, the order of a flow's deliveries to
// an endpoint: a delivery's check for a pending predecessor and the end of
// that predecessor take it, so that one sees the other's outcome and no
// held delivery misses its wake.
func lockFlowOrder(ctx context.Context, tx database.Querier, organizationID, endpointID, flowID string) error {
	_, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('webhook_order:' || $1 || ':' || $2 || ':' || $3, 0))`,
		organizationID, endpointID, flowID)
	return err
}

// pendingBefore is true when delivery $5's flow has a pending delivery to
// its endpoint of an earlier event; its parameters are the organization,
// flow, endpoint and sequence.
const pendingBefore = `exists (select from webhook_events p join events e
		on e.organization_id = p.organization_id and e.id = p.event_id
	where p.organization_id = $1 and p.flow_id = $2 and p.endpoint_id::text = $3 and p.state = 'pending'
	  and p.id <> $5::uuid and e.sequence < $4)`

// HoldInOrder marks a delivery held when a delivery of an earlier event of
// its flow to its endpoint is pending, and not held otherwise, in tx, under
// the flow's order lock; it reports whether it is held.
func HoldInOrder(ctx context.Context, tx database.Querier, organizationID, id string, p Policy) (bool, error) {
	if err := lockFlowOrder(ctx, tx, organizationID, p.EndpointID, p.FlowID); err != nil {
		return false, err
	}
	var held bool
	err := tx.QueryRow(ctx, `update webhook_events set held = `+pendingBefore+`
		where organization_id = $1 and id = $5 returning held`,
		organizationID, p.FlowID, p.EndpointID, p.Sequence, id).Scan(&held)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, database.ErrNotFound
	}
	return held, err
}

// Held is a delivery put off behind an earlier one of its flow.
type Held struct {
	ID    string
	JobID int64
}

// ReleaseNext finds, in tx under the flow's order lock, the pending
// delivery of the flow to the endpoint that comes next after sequence, and
// returns it when it is held, no longer marked so; nil when there is none
// or it is not held (it runs on its own and checks for itself).
func ReleaseNext(ctx context.Context, tx database.Querier, organizationID string, p Policy) (*Held, error) {
	if err := lockFlowOrder(ctx, tx, organizationID, p.EndpointID, p.FlowID); err != nil {
		return nil, err
	}
	var h Held
	err := tx.QueryRow(ctx, `
		with next as (
			select d.id from webhook_events d join events e on e.organization_id = d.organization_id and e.id = d.event_id
			where d.organization_id = $1 and d.flow_id = $2 and d.endpoint_id::text = $3 and d.state = 'pending'
			  and e.sequence > $4
			order by e.sequence limit 1)
		update webhook_events d set held = false from next
		where d.organization_id = $1 and d.id = next.id and d.held
		returning d.id::text, d.job_id`, organizationID, p.FlowID, p.EndpointID, p.Sequence).Scan(&h.ID, &h.JobID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// ReleaseHeld unmarks every held delivery to an endpoint and makes their
// jobs due now: the endpoint no longer orders its deliveries.
func ReleaseHeld(ctx context.Context, tx database.Querier, organizationID, endpointID string) error {
	rows, err := tx.Query(ctx, `update webhook_events set held = false
		where organization_id = $1 and endpoint_id = $2 and held returning job_id`, organizationID, endpointID)
	if err != nil {
		return err
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(jobs) == 0 {
		return err
	}
	_, err = tx.Exec(ctx, `update river_job set state = 'available', scheduled_at = now()
		where id = any($1) and state in ('scheduled', 'available')`, jobs)
	return err
}

// TakeSlot gives one of an organization's deliveries the next free slot of
// its endpoint's throttle, which allows one delivery every interval, and
// returns it; the delivery keeps it (Policy.Slot) when it lies after now.
// now is a parameter: a test's clock decides.
func TakeSlot(ctx context.Context, db database.Querier, organizationID, endpointID, id string, now time.Time, interval time.Duration) (time.Time, error) {
	// One statement, routed on Citus to the organization's node, as
	// RecordAttempt is; the time is a parameter, as Citus refuses now() in
	// a CASE of a write.
	var slot time.Time
	err := db.QueryRow(ctx, `
		with endpoint as (
			update webhook_endpoints set throttle_next = greatest(coalesce(throttle_next, $4), $4) + make_interval(secs => $5)
			where organization_id = $1 and id = $2
			returning throttle_next - make_interval(secs => $5) as slot)
		update webhook_events d set throttle_slot = case when endpoint.slot > $4 then endpoint.slot end
		from endpoint
		where d.organization_id = $1 and d.id = $3
		returning endpoint.slot`, organizationID, endpointID, id, now, interval.Seconds()).Scan(&slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, database.ErrNotFound
	}
	return slot, err
}

// UseSlot clears a delivery's throttle slot as it is used.
func UseSlot(ctx context.Context, db database.Querier, organizationID, id string) error {
	_, err := db.Exec(ctx, `update webhook_events set throttle_slot = null where organization_id = $1 and id = $2`,
		organizationID, id)
	return err
}
