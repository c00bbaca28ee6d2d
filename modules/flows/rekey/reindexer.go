package rekey

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
	"github.com/flowd/flowd/modules/flows/nationalid"
)

// Reindexer fills in the blind index of people's subject keys, and of flows
// not yet under one, that have none, or one made under another key, for
// "flowd flows reindex". It needs none of the collaborators the module
// serves with.
type Reindexer struct {
	pool   *pgxpool.Pool
	sealer *pii.Sealer
	index  *nationalid.BlindIndex
	cursor store.IndexCursor
	// keys is where it stands among the subject keys, which hold the index
	// of the flows sealed under them, once the flows not yet rekeyed are done.
	keys     store.IndexCursor
	keysTurn bool
}

// NewReindexer returns the re-indexer of the flows in pool, opening national
// ids with sealer and indexing them with index.
func NewReindexer(pool *pgxpool.Pool, sealer *pii.Sealer, index *nationalid.BlindIndex) *Reindexer {
	return &Reindexer{pool: pool, sealer: sealer, index: index}
}

// Remaining counts the flows not yet rekeyed and the subject keys still to
// index.
func (r *Reindexer) Remaining(ctx context.Context) (int64, error) {
	flows, err := store.CountUnindexed(ctx, r.pool, r.index.Version())
	if err != nil {
		return 0, err
	}
	keys, err := store.CountUnindexedSubjectKeys(ctx, r.pool, r.index.Version())
	return flows + keys, err
}

// ReindexBatch indexes up to limit flows that need it, after those the
// previous batches looked at, in one transaction, and returns how many it
// found; 0 means it has been through every flow. Rows are written back only
// while sealed as they were read, so it is safe beside live traffic and a
// re-seal; a run that stops half way is simply run again: what it did is
// not done twice.
func (r *Reindexer) ReindexBatch(ctx context.Context, limit int) (int, error) {
	if r.keysTurn {
		return r.reindexSubjectKeys(ctx, limit)
	}
	stale, err := store.UnindexedFlows(ctx, r.pool, r.index.Version(), r.cursor, limit)
	if err != nil {
		return 0, err
	}
	if len(stale) == 0 {
		r.keysTurn = true
		return r.reindexSubjectKeys(ctx, limit)
	}
	err = database.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		for _, f := range stale {
			nationalID, err := r.sealer.Open(f.KeyID, f.NationalIDSealed, store.SealContext(f.ID, "nationalId")...)
			if err != nil {
				return fmt.Errorf("flow %s (key %s): %w", f.ID, f.KeyID, err)
			}
			if err := store.SetPersonIndex(ctx, tx, f, r.index.Of(nationalID), r.index.Version()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	last := stale[len(stale)-1]
	r.cursor = store.IndexCursor{OrganizationID: last.OrganizationID, ID: last.ID}
	return len(stale), nil
}

// reindexSubjectKeys indexes up to limit subject keys that need it, after
// those the previous batches looked at, with the national id each keeps
// sealed under itself.
func (r *Reindexer) reindexSubjectKeys(ctx context.Context, limit int) (int, error) {
	stale, err := store.UnindexedSubjectKeys(ctx, r.pool, r.index.Version(), r.keys, limit)
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	err = database.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		for _, k := range stale {
			key, _, err := subjectkey.OpenRow(r.sealer, k)
			if err != nil {
				return err
			}
			nationalID, err := subjectkey.NationalID(key, k)
			if err != nil {
				return err
			}
			if err := store.SetSubjectPersonIndex(ctx, tx, k, r.index.Of(nationalID), r.index.Version()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	last := stale[len(stale)-1]
	r.keys = store.IndexCursor{OrganizationID: last.OrganizationID, ID: last.ID}
	return len(stale), nil
}
