package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// BacklogCounts are an organization's deliveries not delivered: pending
// (Retrying of them have failed at least once) and failed for good.
type BacklogCounts struct {
	Pending, Retrying, Failed int
	OldestPending             *time.Time
}

// BacklogRow is an organization's delivery that failed at least once.
type BacklogRow struct {
	ID, EventID, FlowID, TaskID, EndpointID string
	Type, URL, State, LastError             string
	CreatedAt                               time.Time
	Attempts                                int
	Test                                    bool // a test event's delivery
}

// DeliveryBacklog counts an organization's deliveries not delivered and
// lists, newest first, at most limit of those that failed at least once.
// No index covers state: an index on a column an attempt updates would stop
// the attempts' HOT updates, and this read serves a console page, not the
// delivery path, so it reads the organization's deliveries.
func DeliveryBacklog(ctx context.Context, db database.Querier, organizationID string, limit int) (BacklogCounts, []BacklogRow, error) {
	var c BacklogCounts
	err := db.QueryRow(ctx, `
		select count(*) filter (where state = 'pending'),
		       count(*) filter (where state = 'pending' and last_error <> ''),
		       count(*) filter (where state = 'failed'),
		       min(created_at) filter (where state = 'pending')
		from webhook_events
		where organization_id = $1 and state in ('pending', 'failed')`, organizationID).
		Scan(&c.Pending, &c.Retrying, &c.Failed, &c.OldestPending)
	if err != nil {
		return BacklogCounts{}, nil, err
	}
	rows, err := db.Query(ctx, `
		select e.id::text, e.event_id::text, e.flow_id, e.task_id, coalesce(e.endpoint_id::text, ''), e.type, e.url,
		       e.state, e.last_error, e.created_at,
		       (select count(*) from webhook_attempts a where a.organization_id = e.organization_id and a.event_id = e.id), e.test
		from webhook_events e
		where e.organization_id = $1 and (e.state = 'failed' or (e.state = 'pending' and e.last_error <> ''))
		order by e.created_at desc
		limit $2`, organizationID, limit)
	if err != nil {
		return BacklogCounts{}, nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BacklogRow, error) {
		var b BacklogRow
		err := r.Scan(&b.ID, &b.EventID, &b.FlowID, &b.TaskID, &b.EndpointID, &b.Type, &b.URL, &b.State, &b.LastError,
			&b.CreatedAt, &b.Attempts, &b.Test)
		return b, err
	})
	return c, list, err
}

// GetBacklogRow returns one of an organization's deliveries. database.ErrNotFound.
func GetBacklogRow(ctx context.Context, db database.Querier, organizationID, id string) (BacklogRow, error) {
	var b BacklogRow
	err := db.QueryRow(ctx, `
		select id::text, event_id::text, flow_id, task_id, coalesce(endpoint_id::text, ''), type, url, state, last_error, created_at, 0, test
		from webhook_events where organization_id = $1 and id = $2`, organizationID, id).
		Scan(&b.ID, &b.EventID, &b.FlowID, &b.TaskID, &b.EndpointID, &b.Type, &b.URL, &b.State, &b.LastError, &b.CreatedAt, &b.Attempts, &b.Test)
	if errors.Is(err, pgx.ErrNoRows) {
		return BacklogRow{}, database.ErrNotFound
	}
	return b, err
}
