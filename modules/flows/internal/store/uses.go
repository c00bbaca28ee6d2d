package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Use is a row of flow_uses: a use an organization recorded of a flow's
// consent.
type Use struct {
	OrganizationID string    `db:"organization_id"`
	ID             string    `db:"id"`
	FlowID         string    `db:"flow_id"`
	Action         string    `db:"action"`
	DataCategories []string  `db:"data_categories"`
	Reference      *string   `db:"reference"`
	UsedAt         time.Time `db:"used_at"`
	RecordedAt     time.Time `db:"recorded_at"`
	RecordedBy     string    `db:"recorded_by"`
}

var useRows = newTable[Use]()

// InsertUse stores u and counts it on its flow, in one round trip: the
// flow's num_uses grows by one, its last_used_at becomes the latest used_at,
// and its version and updated_at are bumped as by any change the API shows.
// It reads what the database set into u and returns the flow. ErrNoRows
// when the flow is gone.
func InsertUse(ctx context.Context, db DB, u *Use) (Flow, error) {
	var b pgx.Batch
	b.Queue(`insert into flow_uses (organization_id, id, flow_id, action, data_categories, reference, used_at, recorded_by)
		values ($1, $2, $3, $4, $5, $6, $7, $8) returning recorded_at`,
		u.OrganizationID, u.ID, u.FlowID, u.Action, u.DataCategories, u.Reference, u.UsedAt, u.RecordedBy)
	b.Queue(`update flows set num_uses = num_uses + 1, last_used_at = greatest(last_used_at, $3),
		version = version + 1, updated_at = greatest(now(), updated_at)
		where organization_id = $1 and id = $2
		returning `+flowColumns, u.OrganizationID, u.FlowID, u.UsedAt)
	br := db.SendBatch(ctx, &b)
	defer br.Close()
	if err := br.QueryRow().Scan(&u.RecordedAt); err != nil {
		return Flow{}, err
	}
	rows, err := br.Query()
	f, err := flowRows.one(rows, err)
	if err != nil {
		return Flow{}, err
	}
	return f, br.Close()
}

// UseQuery selects a page of a flow's uses, latest first (used_at, id
// descending): after CursorID's use, or before it when Backwards.
type UseQuery struct {
	OrganizationID string
	FlowID         string
	Limit          int
	CursorID       string // empty: the first page
	Backwards      bool
}

// Uses returns up to q.Limit of a flow's uses in the order of q and whether
// more follow in that direction. ErrNoRows when the cursor is no use of the
// flow.
func Uses(ctx context.Context, db DB, q UseQuery) ([]Use, bool, error) {
	args := []any{q.OrganizationID, q.FlowID, q.Limit + 1}
	where, order := ``, `used_at desc, id desc`
	if q.CursorID != "" {
		var n int
		if err := db.QueryRow(ctx, `select count(*) from flow_uses where organization_id = $1 and flow_id = $2 and id = $3`,
			q.OrganizationID, q.FlowID, q.CursorID).Scan(&n); err != nil {
			return nil, false, err
		}
		if n == 0 {
			return nil, false, ErrNoRows
		}
		args = append(args, q.CursorID)
		cursor := `(select used_at, id from flow_uses where organization_id = $1 and id = $4)`
		if q.Backwards {
			where, order = ` and (used_at, id) > `+cursor, `used_at, id`
		} else {
			where = ` and (used_at, id) < ` + cursor
		}
	}
	rows, err := useRows.all(db.Query(ctx, `select `+useRows.columns+` from flow_uses
		where organization_id = $1 and flow_id = $2`+where+` order by `+order+` limit $3`, args...))
	if err != nil {
		return nil, false, err
	}
	more := len(rows) > q.Limit
	if more {
		rows = rows[:q.Limit]
	}
	if q.Backwards {
		for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
			rows[i], rows[j] = rows[j], rows[i]
		}
	}
	return rows, more, nil
}

// DueForExpiringNotice returns up to limit acceptances of every
// organization whose validity ends within notice and whose flow.expiring
// has not gone out. It locks nothing: ClaimExpiringNotice decides on each.
func DueForExpiringNotice(ctx context.Context, db DB, notice time.Duration, limit int) ([]FlowKey, error) {
	return flowKeyRows.all(db.Query(ctx, `select `+flowKeyRows.columns+` from flows
		where consent_status = 'Accepted' and valid_until is not null and expiring_notified_at is null
		and valid_until <= now() + $1 * interval '1 microsecond' and valid_until > now()
		order by valid_until limit $2`, notice.Microseconds(), limit))
}

// ClaimExpiringNotice marks the acceptance's flow.expiring as sent when its
// validity ends within notice (and has not ended) by the database's clock,
// and returns the flow. The update's own row lock and condition make a
// second call, concurrent or later, change nothing: it is ErrNoRows, as is
// a flow that is gone, not accepted, not yet due or notified already.
func ClaimExpiringNotice(ctx context.Context, db DB, organizationID, id string, notice time.Duration) (Flow, error) {
	return flowRows.one(db.Query(ctx, `update flows set expiring_notified_at = now()
		where organization_id = $1 and id = $2 and consent_status = 'Accepted' and expiring_notified_at is null
		and valid_until <= now() + $3 * interval '1 microsecond' and valid_until > now()
		returning `+flowColumns, organizationID, id, notice.Microseconds()))
}
