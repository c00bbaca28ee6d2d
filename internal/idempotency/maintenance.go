package idempotency

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// purgeBatch is how many expired answers one statement deletes.
const purgeBatch = 1000

// Purge deletes the expired answers of every organization, in batches, and
// returns how many it deleted. The rows are chosen by primary key, not
// ctid: on Citus the choice is made over every shard, where a ctid names a
// different row on each.
func (k *Keys) Purge(ctx context.Context) (int64, error) {
	var total int64
	for {
		tag, err := k.pool.Exec(ctx, `delete from api_idempotency_keys where (organization_id, key) in (
			select organization_id, key from api_idempotency_keys where expires_at <= now() limit $1)`, purgeBatch)
		total += tag.RowsAffected()
		if err != nil || tag.RowsAffected() < purgeBatch {
			return total, database.Classify(err)
		}
	}
}

// Run purges expired answers every interval until ctx ends, and then
// returns nil; a purge that fails is logged and tried again next time.
// Every instance may run it.
func (k *Keys) Run(ctx context.Context) error {
	t := time.NewTicker(k.interval)
	defer t.Stop()
	for {
		// A shutdown cuts the purge short; that is no warning.
		if _, err := k.Purge(ctx); err != nil && ctx.Err() == nil {
			k.log.WarnContext(ctx, "idempotency: purging expired keys", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sealedAnswer is the sealed body of one kept answer.
type sealedAnswer struct {
	organizationID, key, keyID string
	sealed                     []byte
	carried                    *carriedRow
}

// context is what the answer's body is bound to: its row, or a carried
// row's flow.
func (a sealedAnswer) context() []string {
	if a.carried != nil {
		return carriedSealContext(a.carried.FlowID)
	}
	return sealContext(a.organizationID, a.key)
}

// ResealBatch seals again, under the current data key, up to limit answers
// whose body is sealed under a previous one, for "flowd keys
// rotate-data-key", and returns how many it found; 0 means none is left.
// The rows are read without locks (a statement over every organization's
// rows cannot lock them on Citus) and each is written back only while it is
// still sealed as it was read, so it is safe beside live traffic and other
// re-sealers. Their request hashes cannot be made again (the request is not
// kept): they match while the key that made them is configured. A carried
// row's consent link is sealed again as it was, bound to its flow.
func (k *Keys) ResealBatch(ctx context.Context, limit int) (int, error) {
	current := k.sealer.KeyID()
	rows, err := k.pool.Query(ctx, `select organization_id, key, pii_key_id, body_sealed, carried from api_idempotency_keys
		where pii_key_id <> $1 order by organization_id, key limit $2`, current, limit)
	if err != nil {
		return 0, err
	}
	stale, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sealedAnswer, error) {
		var a sealedAnswer
		return a, r.Scan(&a.organizationID, &a.key, &a.keyID, &a.sealed, &a.carried)
	})
	if err != nil {
		return 0, err
	}
	err = database.WithTx(ctx, k.pool, func(tx pgx.Tx) error {
		for _, a := range stale {
			body, err := k.sealer.Open(a.keyID, a.sealed, a.context()...)
			if err != nil {
				return fmt.Errorf("idempotency key of organization %s (data key %s): %w", a.organizationID, a.keyID, err)
			}
			if _, err := tx.Exec(ctx, `update api_idempotency_keys set pii_key_id = $4, body_sealed = $5
				where organization_id = $1 and key = $2 and pii_key_id = $3`, a.organizationID, a.key, a.keyID,
				current, k.sealer.Seal(body, a.context()...)); err != nil {
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
