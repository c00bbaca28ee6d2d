package consent

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent/internal/requests"
)

// ResealBatch re-seals, in one transaction, up to limit link tokens still
// sealed under a previous data key with the current one, and returns how
// many it changed; 0 means nothing is left. Like flows' ResealBatch it is
// idempotent, resumable and safe beside live traffic.
func (r *Requests) ResealBatch(ctx context.Context, limit int) (int, error) {
	current := r.sealer.KeyID()
	n := 0
	err := database.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		stale, err := requests.Stale(ctx, tx, current, limit)
		if err != nil {
			return err
		}
		for _, req := range stale {
			token, err := r.sealer.Open(req.PIIKeyID, req.TokenSealed, tokenContext(req.FlowID))
			if err != nil {
				return fmt.Errorf("consent request of flow %s (key %s): %w", req.FlowID, req.PIIKeyID, err)
			}
			if err := requests.Reseal(ctx, tx, req.FlowID, current, r.sealer.Seal(token, tokenContext(req.FlowID))); err != nil {
				return err
			}
		}
		n = len(stale)
		return nil
	})
	return n, err
}
