package webhooks

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/flowd/flowd/modules/webhooks/internal/store"
)

// cleanupArgs are the arguments of the periodic job that prunes old events.
type cleanupArgs struct{}

// Kind names the job kind in River's table.
func (cleanupArgs) Kind() string { return "flowd.webhook_cleanup" }

// cleanupWorker deletes deliveries finished longer than retention ago, with
// their attempts, events older than eventRetention, and recoveries finished
// longer than retention ago, in small batches so that no lock is held for long.
type cleanupWorker struct {
	river.WorkerDefaults[cleanupArgs]
	pool           *pgxpool.Pool
	retention      time.Duration
	eventRetention time.Duration
}

func (w *cleanupWorker) Work(ctx context.Context, _ *river.Job[cleanupArgs]) error {
	for _, prune := range []struct {
		before time.Time
		delete func(context.Context, store.DB, time.Time, int) (int64, error)
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
