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

// cleanupWorker deletes events finished longer than retention ago, with
// their attempts, in small batches so that no lock is held for long.
type cleanupWorker struct {
	river.WorkerDefaults[cleanupArgs]
	pool      *pgxpool.Pool
	retention time.Duration
}

func (w *cleanupWorker) Work(ctx context.Context, _ *river.Job[cleanupArgs]) error {
	before := time.Now().Add(-w.retention)
	for {
		n, err := store.DeleteFinished(ctx, w.pool, before, 1000)
		if err != nil || n < 1000 {
			return err
		}
	}
}
