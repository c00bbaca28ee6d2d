// Package rekey brings the flows module's rows up to the current keys,
// beside live traffic: Rekeyer moves the personal data of flows made
// before per-person keys under their person's subject key, Resealer seals
// what the data key seals (older flows, subject keys) again under the
// current data key after a rotation, and Reindexer makes the blind person
// index again under the current key encryption key.
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
)

// Resealer re-seals the flows module's personal data under the current data
// key, for "flowd keys rotate-data-key". It needs none of the collaborators
// the module serves with.
type Resealer struct {
	pool   *pgxpool.Pool
	sealer *pii.Sealer
}

// NewResealer returns the re-sealer of the flows in pool, sealing with sealer.
func NewResealer(pool *pgxpool.Pool, sealer *pii.Sealer) *Resealer {
	return &Resealer{pool: pool, sealer: sealer}
}

// ResealBatch re-seals up to limit flows whose personal data is still
// sealed under a previous data key: each value is opened with the key that
// sealed it and sealed again (and the national id's lookup hash
// recomputed) under the current key, in one transaction.
// It returns how many stale rows it found; 0 means nothing is left. A row
// is written back only while it is sealed as it was read (see
// store.Reseal), so it is safe beside live traffic and other re-sealers,
// and a run that stops half way is simply run again. A value that does not
// open (its key is not configured) stops it with pii.ErrUnknownKey.
func (m *Resealer) ResealBatch(ctx context.Context, limit int) (int, error) {
	current := m.sealer.KeyID()
	stale, err := store.StaleFlows(ctx, m.pool, current, limit)
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		for _, f := range stale {
			nationalID, err := m.sealer.Open(f.KeyID, f.NationalIDSealed, store.SealContext(f.ID, "nationalId")...)
			if err != nil {
				return fmt.Errorf("flow %s (key %s): %w", f.ID, f.KeyID, err)
			}
			lastName, err := m.sealer.Open(f.KeyID, f.LastNameSealed, store.SealContext(f.ID, "lastName")...)
			if err != nil {
				return fmt.Errorf("flow %s (key %s): %w", f.ID, f.KeyID, err)
			}
			if err := store.Reseal(ctx, tx, f, current,
				m.sealer.Seal(nationalID, store.SealContext(f.ID, "nationalId")...), m.sealer.Hash("nationalId", nationalID),
				m.sealer.Seal(lastName, store.SealContext(f.ID, "lastName")...)); err != nil {
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

// ResealSubjectKeysBatch re-seals up to limit subject keys still sealed
// under a previous data key, and hashes their subject again under the
// current one, in one transaction; it returns how many it found, 0 when
// none is left. Like ResealBatch it writes a key back only while it is
// sealed as it was read, so it is safe beside live traffic; the flows
// sealed under the keys are not touched.
func (m *Resealer) ResealSubjectKeysBatch(ctx context.Context, limit int) (int, error) {
	current := m.sealer.KeyID()
	stale, err := store.StaleSubjectKeys(ctx, m.pool, current, limit)
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	err = database.WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		for _, k := range stale {
			subject, sealed, err := subjectkey.Reseal(m.sealer, k)
			if err != nil {
				return err
			}
			if err := store.ResealSubjectKey(ctx, tx, k, current, subject, sealed); err != nil {
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
