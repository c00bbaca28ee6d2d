package consent

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent/internal/requests"
)

// ResealBatch re-seals up to limit link tokens still sealed under a
// previous data key with the current one, in one transaction, and returns
// how many stale ones it found; 0 means nothing is left. Like flows'
// ResealBatch it is idempotent, resumable and safe beside live traffic.
func (r *Requests) ResealBatch(ctx context.Context, limit int) (int, error) {
	current := r.sealer.KeyID()
	stale, err := requests.Stale(ctx, r.pool, current, limit)
	if err != nil {
		return 0, err
	}
	err = database.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		for _, req := range stale {
			token, err := r.sealer.Open(req.PIIKeyID, req.TokenSealed, tokenContext(req.FlowID))
			if err != nil {
				return fmt.Errorf("consent request of flow %s (key %s): %w", req.FlowID, req.PIIKeyID, err)
			}
			if err := requests.Reseal(ctx, tx, req, current, r.sealer.Seal(token, tokenContext(req.FlowID))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(stale), nil
}
