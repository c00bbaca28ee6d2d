package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows"
)

// expireConsents cancels flows whose consent has expired (event
// flow.cancelled) every interval until ctx ends. Links are also refused at
// use, so this only makes the state and the webhook follow. Several
// instances may run it: ExpireDue skips rows another one holds.
func expireConsents(ctx context.Context, progress flows.Progress, log *slog.Logger, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for {
			n, err := progress.ExpireDue(ctx, time.Now(), 500)
			if err != nil {
				if ctx.Err() == nil && !database.IsUnavailable(err) {
					log.Error("expiring consents", "error", err.Error())
				}
				break
			}
			if n > 0 {
				log.Info("expired consent requests", "count", n)
			}
			if n < 500 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
