package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Use is a row of flow_uses: a use an organization recorded of a flow's
// consent. Its free text is sealed under the subject key of its flow
// (ActionSealed, ReferenceSealed, read with the key's sealed bytes), or,
// recorded before that or for a flow not yet under a subject key, kept as
// it was written (Action, Reference).
type Use struct {
	OrganizationID  string    `db:"organization_id"`
	ID              string    `db:"id"`
	FlowID          string    `db:"flow_id"`
	Action          *string   `db:"action"`
	ActionSealed    []byte    `db:"action_sealed"`
	DataCategories  []string  `db:"data_categories"`
	Reference       *string   `db:"reference"`
	ReferenceSealed []byte    `db:"reference_sealed"`
	UsedAt          time.Time `db:"used_at"`
	RecordedAt      time.Time `db:"recorded_at"`
	RecordedBy      string    `db:"recorded_by"`
	// Resource is the resource a consent token opened; null for other uses.
	Resource *string `db:"resource"`
	// SubjectKeyID and SubjectKeySealed are the flow's subject key, read
	// with the use.
	SubjectKeyID     *string `db:"subject_key_id" select:"(select f.subject_key_id from flows f where f.organization_id = flow_uses.organization_id and f.id = flow_uses.flow_id)"`
	SubjectKeySealed []byte  `db:"subject_key_sealed" select:"(select k.key_sealed from flows f join subject_keys k on k.organization_id = f.organization_id and k.id = f.subject_key_id where f.organization_id = flow_uses.organization_id and f.id = flow_uses.flow_id)"`
}

// UseContext binds a use's sealed field to the use.
func UseContext(useID, field string) []string { return []string{"use:", useID, ":", field} }

var useRows = newTable[Use]()

// UseCount is a use to store and count on its flow (InsertUses), while
// the flow's consent is accepted and in force at Now under the subject key
// KeyID (nil: none) that the use's text was sealed with.
type UseCount struct {
	Use   *Use // what the database sets is read into it
	Now   time.Time
	KeyID *string
	// What the count changed, when Counted: the flow's version and
	// updated_at, its process status, and the sequence number drawn for
	// the use's event.
	Counted       bool
	Version       int
	EventSequence int
	ProcessStatus string
	UpdatedAt     time.Time
}

// insertUseSQL stores a use and counts it on its flow in one statement:
// the use is inserted only from the row the count updated, so that a flow
// gone or no longer in force gets neither. The count grows num_uses by
// one, makes last_used_at the latest used_at, bumps the version and
// updated_at as any change the API shows does, and draws the next event's
// sequence number.
const insertUseSQL = `with counted as (
		update flows set num_uses = num_uses + 1, last_used_at = greatest(last_used_at, $9),
			version = version + 1, updated_at = greatest(now(), updated_at), event_sequence = event_sequence + 1
		where organization_id = $1 and id = $3 and consent_status = 'Accepted'
			and (valid_until is null or valid_until > $12) and subject_key_id is not distinct from $13
		returning organization_id, id, version, event_sequence, process_status, updated_at),
	used as (
		insert into flow_uses (organization_id, id, flow_id, action, action_sealed, data_categories, reference, reference_sealed,
			used_at, recorded_by, resource)
		select organization_id, $2, id, $4, $5, $6, $7, $8, $9, $10, $11 from counted
		returning recorded_at)
	select counted.version, counted.event_sequence, counted.process_status, counted.updated_at, used.recorded_at
	from counted, used`

// InsertUses stores and counts each of uses, in their order, in one round
// trip; a use whose flow no longer meets its condition is left uncounted,
// and nothing of it is written. A lockTimeout above zero bounds, for the
// rest of db's transaction, how long a statement waits for a lock.
func InsertUses(ctx context.Context, db DB, uses []*UseCount, lockTimeout time.Duration) error {
	var b pgx.Batch
	if lockTimeout > 0 {
		b.Queue(`select set_config('lock_timeout', $1, true)`, strconv.FormatInt(lockTimeout.Milliseconds(), 10))
	}
	for _, c := range uses {
		u := c.Use
		b.Queue(insertUseSQL, u.OrganizationID, u.ID, u.FlowID, u.Action, u.ActionSealed, u.DataCategories, u.Reference,
			u.ReferenceSealed, u.UsedAt, u.RecordedBy, u.Resource, c.Now, c.KeyID)
	}
	br := db.SendBatch(ctx, &b)
	defer br.Close()
	if lockTimeout > 0 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	for _, c := range uses {
		err := br.QueryRow().Scan(&c.Version, &c.EventSequence, &c.ProcessStatus, &c.UpdatedAt, &c.Use.RecordedAt)
		c.Counted = err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	return br.Close()
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
// more follow in that direction. database.ErrNotFound when the cursor is no use of the
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
			return nil, false, database.ErrNotFound
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
// second call, concurrent or later, change nothing: it is database.ErrNotFound, as is
// a flow that is gone, not accepted, not yet due or notified already.
func ClaimExpiringNotice(ctx context.Context, db DB, organizationID, id string, notice time.Duration) (Flow, error) {
	return flowRows.one(db.Query(ctx, `update flows set expiring_notified_at = now()
		where organization_id = $1 and id = $2 and consent_status = 'Accepted' and expiring_notified_at is null
		and valid_until <= now() + $3 * interval '1 microsecond' and valid_until > now()
		returning `+flowColumns, organizationID, id, notice.Microseconds()))
}

// UsesOfFlows returns every use of flows, locked for update: for each
// organization, a statement that locks them, all in one round trip, and
// when there are any, one that reads them, all in another. The lock is a
// statement of its own: Citus locks rows only in a statement it routes to
// one shard, and the subqueries that read the flow's key keep the read
// from being one.
func UsesOfFlows(ctx context.Context, db DB, flows []FlowKey) ([]Use, error) {
	if len(flows) == 0 {
		return nil, nil
	}
	runs := byOrganization(flows, func(f FlowKey) string { return f.OrganizationID })
	ids := make([][]string, len(runs))
	var lock pgx.Batch
	for i, run := range runs {
		ids[i] = arrayOf(run, func(f FlowKey) string { return f.ID })
		lock.Queue(`select 1 from flow_uses where organization_id = $1 and flow_id = any($2::text[]::uuid[]) order by id for update`,
			run[0].OrganizationID, ids[i])
	}
	locked, err := countRows(db.SendBatch(ctx, &lock), lock.Len())
	if err != nil || locked == 0 {
		return nil, err
	}
	var read pgx.Batch
	for i, run := range runs {
		read.Queue(`select `+useRows.columns+` from flow_uses where organization_id = $1 and flow_id = any($2::text[]::uuid[])
			order by id`, run[0].OrganizationID, ids[i])
	}
	br := db.SendBatch(ctx, &read)
	defer br.Close()
	var uses []Use
	for range read.Len() {
		more, err := useRows.all(br.Query())
		if err != nil {
			return nil, err
		}
		uses = append(uses, more...)
	}
	return uses, br.Close()
}

// countRows counts the rows of n statements' results in br, and closes it.
func countRows(br pgx.BatchResults, n int) (int, error) {
	defer br.Close()
	count := 0
	for range n {
		rows, err := br.Query()
		if err != nil {
			return 0, err
		}
		for rows.Next() {
			count++
		}
		if err := rows.Err(); err != nil {
			return 0, err
		}
	}
	return count, br.Close()
}

// SealedUse is a use's free text sealed under the subject key KeyID.
type SealedUse struct {
	Use               Use // as it was read
	KeyID             string
	Action, Reference []byte // sealed
}

// SealUses stores each use's free text sealed under its subject key, and
// drops its text as written, unless it has been sealed otherwise since it
// was read or its flow is not under that key: a statement per
// organization, in one round trip.
func SealUses(ctx context.Context, db DB, sealed []SealedUse) error {
	return sendByOrganization(ctx, db, sealed, func(u SealedUse) string { return u.Use.OrganizationID },
		`update flow_uses u set action = null, reference = null, action_sealed = v.action_sealed,
				reference_sealed = v.reference_sealed
			from unnest($2::text[]::uuid[], $3::bytea[], $4::bytea[], $5::bytea[], $6::text[]::uuid[])
				as v(id, was, action_sealed, reference_sealed, subject_key_id)
			where u.organization_id = $1 and u.id = v.id and u.action_sealed is not distinct from v.was
				and exists (select 1 from flows f where f.organization_id = $1 and f.id = u.flow_id
					and f.subject_key_id = v.subject_key_id)`,
		func(run []SealedUse) []any {
			return []any{arrayOf(run, func(u SealedUse) string { return u.Use.ID }),
				arrayOf(run, func(u SealedUse) []byte { return u.Use.ActionSealed }),
				arrayOf(run, func(u SealedUse) []byte { return u.Action }),
				arrayOf(run, func(u SealedUse) []byte { return u.Reference }),
				arrayOf(run, func(u SealedUse) string { return u.KeyID })}
		})
}

// PlainUses returns up to limit uses after cursor, in the primary key's
// order, kept as written whose flow is under a subject key: recorded
// before their text was sealed.
func PlainUses(ctx context.Context, db DB, after IndexCursor, limit int) ([]Use, error) {
	if after.ID == "" {
		after.ID = "00000000-0000-0000-0000-000000000000"
	}
	return useRows.all(db.Query(ctx, `select `+useRows.columns+` from flow_uses
		where action is not null and (organization_id, id) > ($1, $2::uuid)
			and exists (select 1 from flows f where f.organization_id = flow_uses.organization_id and f.id = flow_uses.flow_id
				and f.subject_key_id is not null)
		order by organization_id, id limit $3`, after.OrganizationID, after.ID, limit))
}

// CountPlainUses counts the uses kept as written whose flow is under a
// subject key.
func CountPlainUses(ctx context.Context, db DB) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `select count(*) from flow_uses u where u.action is not null
		and exists (select 1 from flows f where f.organization_id = u.organization_id and f.id = u.flow_id and f.subject_key_id is not null)`).Scan(&n)
	return n, err
}
