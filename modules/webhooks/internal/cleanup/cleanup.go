// Package cleanup is the webhooks' periodic job that prunes finished
// deliveries, old events and finished recoveries.
package cleanup

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// Args are the arguments of the periodic job that prunes old events.
type Args struct{}

// Kind names the job kind in River's table.
func (Args) Kind() string { return "flowd.webhook_cleanup" }

// Worker deletes deliveries finished longer than retention ago, with
// their attempts, events older than eventRetention, and recoveries finished
// longer than retention ago, in small batches so that no lock is held for long.
type Worker struct {
	river.WorkerDefaults[Args]
	pool           *pgxpool.Pool
	retention      time.Duration
	eventRetention time.Duration
}

// NewWorker returns the cleanup worker on pool.
func NewWorker(pool *pgxpool.Pool, retention, eventRetention time.Duration) *Worker {
	return &Worker{pool: pool, retention: retention, eventRetention: eventRetention}
}

// Work prunes, batch by batch.
func (w *Worker) Work(ctx context.Context, _ *river.Job[Args]) error {
	for _, prune := range []struct {
		before time.Time
		delete func(context.Context, database.Querier, time.Time, int) (int64, error)
	}{
		{time.Now().Add(-w.retention), store.DeleteFinished},
		{time.Now().Add(-w.eventRetention), store.DeleteOldEvents},
		{time.Now().Add(-w.retention), store.DeleteOldRecoveries},
	} {
		for {
			n, err := prune.delete(ctx, w.pool, prune.before, 1000)
			if err != nil {
				return err
			}
			if n < 1000 {
				break
			}
		}
	}
	return nil
}
