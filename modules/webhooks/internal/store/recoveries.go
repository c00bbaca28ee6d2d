package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Recovery is a row of webhook_recoveries.
type Recovery struct {
	OrganizationID string
	ID             string
	EndpointID     string
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

// RecoveryActiveIndex is the unique index that holds an endpoint to one
// queued or running recovery.
const RecoveryActiveIndex = "webhook_recoveries_active"

const recoveryColumns = `r.organization_id, r.id::text, r.endpoint_id::text, r.since, r.state, r.total, r.scheduled,
	r.requested_by, r.created_at, r.started_at, r.finished_at, r.error`

func scanRecovery(row pgx.Row) (Recovery, error) {
	var r Recovery
	err := row.Scan(&r.OrganizationID, &r.ID, &r.EndpointID, &r.Since, &r.State, &r.Total, &r.Scheduled,
		&r.RequestedBy, &r.CreatedAt, &r.StartedAt, &r.FinishedAt, &r.Error)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// failedInWindow selects the failed deliveries of organization $1 to
// endpoint $2 created from $3 to until, the window of a recovery. It
// repeats the predicate of the index webhook_events_endpoint.
func failedInWindow(until string) string {
	return `from webhook_events
	where organization_id = $1 and endpoint_id = $2 and state = 'failed' and endpoint_id is not null
	  and created_at >= $3 and created_at <= ` + until
}

// InsertRecovery stores a queued recovery of the endpoint's deliveries that
// failed from since to now (the recovery's created_at), counted in the same
// statement, and returns it.
// A second active recovery of the endpoint violates RecoveryActiveIndex.
func InsertRecovery(ctx context.Context, db DB, organizationID, id, endpointID string, since time.Time, requestedBy string) (Recovery, error) {
	return scanRecovery(db.QueryRow(ctx, `
		with failed as (select count(*)::int as n `+failedInWindow("now()")+`)
		insert into webhook_recoveries as r (organization_id, id, endpoint_id, since, total, requested_by)
		select $1, $4, $2, $3, n, $5 from failed
		returning `+recoveryColumns,
		organizationID, endpointID, since, id, requestedBy))
}

// GetRecovery returns one recovery of an endpoint that still exists. ErrNotFound.
func GetRecovery(ctx context.Context, db DB, organizationID, endpointID, id string) (Recovery, error) {
	return scanRecovery(db.QueryRow(ctx, `select `+recoveryColumns+` from webhook_recoveries r
		join webhook_endpoints e on e.organization_id = r.organization_id and e.id = r.endpoint_id
		where r.organization_id = $1 and r.endpoint_id = $2 and r.id = $3`, organizationID, endpointID, id))
}

// ListRecoveries returns up to limit of an endpoint's recoveries, newest first.
func ListRecoveries(ctx context.Context, db DB, organizationID, endpointID string, limit int) ([]Recovery, error) {
	rows, err := db.Query(ctx, `select `+recoveryColumns+` from webhook_recoveries r
		where r.organization_id = $1 and r.endpoint_id = $2
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
// cursor, and its endpoint as it is now (nil when it was deleted).
type RecoveryRun struct {
	Recovery
	CursorAt        *time.Time
	CursorID        *string
	EndpointURL     *string
	EndpointEnabled bool
}

// LockRecovery reads a recovery and locks its row until tx ends, so that
// two runs of its job take their batches one after the other. ErrNotFound.
func LockRecovery(ctx context.Context, tx DB, organizationID, id string) (RecoveryRun, error) {
	var r RecoveryRun
	var enabled *bool
	err := tx.QueryRow(ctx, `select `+recoveryColumns+`, r.cursor_created_at, r.cursor_id::text, e.url, e.enabled
		from webhook_recoveries r
		left join webhook_endpoints e on e.organization_id = r.organization_id and e.id = r.endpoint_id
		where r.organization_id = $1 and r.id = $2
		for update of r`, organizationID, id).
		Scan(&r.OrganizationID, &r.ID, &r.EndpointID, &r.Since, &r.State, &r.Total, &r.Scheduled,
			&r.RequestedBy, &r.CreatedAt, &r.StartedAt, &r.FinishedAt, &r.Error, &r.CursorAt, &r.CursorID, &r.EndpointURL, &enabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	r.EndpointEnabled = enabled != nil && *enabled
	return r, err
}

// FailedDelivery is a delivery a recovery sends again, with its place in
// the recovery's order.
type FailedDelivery struct {
	ID        string
	CreatedAt time.Time
}

// NextFailed returns, and locks until tx ends, up to limit of the failed
// deliveries of a recovery's window that come after its cursor by
// (created_at, id), in the order of webhook_events_endpoint (the id
// is selected under another name, so that the order is the column's).
func NextFailed(ctx context.Context, tx DB, r RecoveryRun, limit int) ([]FailedDelivery, error) {
	rows, err := tx.Query(ctx, `select id::text as delivery_id, created_at `+failedInWindow("$4")+`
		  and ($5::timestamptz is null or (created_at, id) > ($5, $6::uuid))
		order by created_at, id
		limit $7
		for update`,
		r.OrganizationID, r.EndpointID, r.Since, r.CreatedAt, r.CursorAt, r.CursorID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (FailedDelivery, error) {
		var d FailedDelivery
		err := row.Scan(&d.ID, &d.CreatedAt)
		return d, err
	})
}

// ScheduleBatch makes deliveries pending again, each with its new job and
// the endpoint's URL of now, and moves the recovery's cursor past the last
// of them and its progress on by their number: one statement, so that the
// batch and the progress commit together. Both of its tables are named by
// the organization, so that on Citus it runs on the organization's node;
// least keeps the first start's time: on Citus, coalesce may not call now().
func ScheduleBatch(ctx context.Context, tx DB, organizationID, recoveryID, url string, ids []string, jobs []int64, last FailedDelivery) error {
	_, err := tx.Exec(ctx, `
		with reset as (
			update webhook_events e set state = 'pending', finished_at = null, url = $3, job_id = d.job
			from unnest($4::uuid[], $5::bigint[]) as d(id, job)
			where e.organization_id = $1 and e.id = d.id
			returning 1)
		update webhook_recoveries set scheduled = scheduled + (select count(*) from reset),
			cursor_created_at = $6, cursor_id = $7, state = 'running', started_at = least(started_at, now())
		where organization_id = $1 and id = $2`,
		organizationID, recoveryID, url, ids, jobs, last.CreatedAt, last.ID)
	return err
}

// FinishRecovery ends a recovery in state (done or failed) with message.
// A finished recovery's total becomes what it scheduled: deliveries that
// stopped failing before it reached them (sent again by hand) are not
// counted as left undone. least keeps the first start's time (see ScheduleBatch).
func FinishRecovery(ctx context.Context, db DB, organizationID, id, state, message string) error {
	_, err := db.Exec(ctx, `update webhook_recoveries set state = $3, error = $4, finished_at = now(),
			started_at = least(started_at, now()),
			total = case when $3 = 'done' then scheduled else total end
		where organization_id = $1 and id = $2 and state in ('queued', 'running')`, organizationID, id, state, message)
	return err
}

// DeleteOldRecoveries deletes up to limit recoveries finished before
// before and returns how many it deleted.
func DeleteOldRecoveries(ctx context.Context, db DB, before time.Time, limit int) (int64, error) {
	tag, err := db.Exec(ctx, `
		delete from webhook_recoveries where (organization_id, id) in (
			select organization_id, id from webhook_recoveries where finished_at < $1 limit $2)`, before, limit)
	return tag.RowsAffected(), err
}
