package flows

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/internal/store"
)

// A consent definition version may say how long its completed flows are
// kept (its retention). The leader of the expiry jobs' River client
// (internal/expiry) sweeps every hour, and once when it starts: each completed flow decided longer
// ago than its version's retention is deleted as Delete deletes one, with
// its flow.deleted, a batch to a transaction.

// RetentionRule is how long the completed flows of one definition version
// are kept, from their decision.
type RetentionRule struct {
	OrganizationID string
	DefinitionID   string
	Version        int
	Years, Months  int
	Days           int
}

// Cutoff is the decision time before which a flow under r is past it.
func (r RetentionRule) Cutoff(now time.Time) time.Time {
	return now.AddDate(-r.Years, -r.Months, -r.Days)
}

// Retentions gives every definition version's retention that has one: the
// consent module.
type Retentions interface {
	RetentionRules(ctx context.Context) ([]RetentionRule, error)
}

// RetainedBy is who the deletion log names for a flow past its retention.
const RetainedBy = "retention"

// EraseRetained deletes every completed flow decided longer ago than its
// definition version's retention, by now, at most limit to a transaction,
// and returns how many it deleted. Without Config.Retention it does nothing.
func (m *Manager) EraseRetained(ctx context.Context, now time.Time, limit int) (int, error) {
	if m.cfg.Retention == nil {
		return 0, nil
	}
	rules, err := m.cfg.Retention.RetentionRules(ctx)
	if err != nil {
		return 0, fmt.Errorf("flows: retention rules: %w", err)
	}
	total := 0
	for _, r := range rules {
		for {
			n := 0
			err := database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
				rows, err := store.LockRetained(ctx, tx, r.OrganizationID, r.DefinitionID, r.Version, r.Cutoff(now), limit)
				if err != nil {
					return err
				}
				for _, row := range rows {
					if _, err := m.deleteLockedTx(ctx, tx, row, RetainedBy); err != nil {
						return err
					}
				}
				n = len(rows)
				return nil
			})
			if err != nil {
				return total, fmt.Errorf("flows: retention: %w", err)
			}
			total += n
			if n < limit {
				break
			}
		}
	}
	return total, nil
}
