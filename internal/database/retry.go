package database

import (
	"context"
	"log/slog"
	"time"
)

// RetryWhileUnavailable runs start until it succeeds, fails for a reason
// other than an unreachable database, or ctx ends. A worker that starts
// while the database is slow to answer (a restart, a failover, a machine
// too busy to accept a connection within its timeout) waits for it instead
// of taking the whole process down: between tries it waits first, then
// twice as long each time, up to half a minute, and logs each failure.
func RetryWhileUnavailable(ctx context.Context, log *slog.Logger, what string, first time.Duration, start func(context.Context) error) error {
	wait := first
	for {
		err := start(ctx)
		if err == nil || !IsUnavailable(err) || ctx.Err() != nil {
			return err
		}
		log.WarnContext(ctx, what+": the database is unavailable; trying again", "error", err.Error(), "in", wait.String())
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}
