package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Backlog is the deliveries not yet finished, by state: due (to be sent
// now, whether first attempts or retries), retrying (waiting for their
// next attempt), held (put off because their host was busy) and running.
type Backlog struct {
	Counts map[string]int64
	// OldestDue is how long the delivery due the longest has waited since
	// it came due; zero when none is due.
	OldestDue time.Duration
}

// ReadBacklog reads the backlog of deliveries from their River jobs, whose
// state and time due say where each delivery stands.
func ReadBacklog(ctx context.Context, db database.Querier, kind string) (Backlog, error) {
	rows, err := db.Query(ctx, `
		select case
		         when state = 'running' then 'running'
		         when scheduled_at <= now() then 'due'
		         when state = 'retryable' then 'retrying'
		         else 'held'
		       end as backlog_state,
		       count(*),
		       coalesce(extract(epoch from now() - min(scheduled_at)), 0)::float8
		from river_job
		where kind = $1 and state in ('available', 'scheduled', 'retryable', 'running')
		group by backlog_state`, kind)
	if err != nil {
		return Backlog{}, err
	}
	b := Backlog{Counts: map[string]int64{"due": 0, "retrying": 0, "held": 0, "running": 0}}
	var (
		state  string
		n      int64
		oldest float64
	)
	_, err = pgx.ForEachRow(rows, []any{&state, &n, &oldest}, func() error {
		b.Counts[state] = n
		if state == "due" {
			b.OldestDue = time.Duration(oldest * float64(time.Second))
		}
		return nil
	})
	return b, err
}

// EndpointHealth counts the endpoints whose deliveries are failing (still
// enabled) and those flowd disabled for it.
func EndpointHealth(ctx context.Context, db database.Querier) (failing, disabled int64, err error) {
	err = db.QueryRow(ctx, `
		select count(*) filter (where enabled and failing_since is not null),
		       count(*) filter (where not enabled and disabled_reason is not null)
		from webhook_endpoints`).Scan(&failing, &disabled)
	return failing, disabled, err
}
