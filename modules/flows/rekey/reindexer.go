package rekey

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// Reindexer fills in the blind index of people's subject keys, and of flows
// not yet under one, that have none, or one made under another key or of
// another reading of the format, for "flowd flows reindex". A subject key
// made before flowd had canonical forms, under a form that may name two
// people (a Swedish number without its century), is replaced: each of its
// flows moves under the key of its own person, found or made as a create
// does, and the emptied key is destroyed. It needs none of the
// collaborators the module serves with.
type Reindexer struct {
	pool   *pgxpool.Pool
	sealer *pii.Sealer
	index  *nationalid.BlindIndex
	format nationalid.Format
	cursor store.IndexCursor
	// keys is where it stands among the subject keys, which hold the index
	// of the flows sealed under them, once the flows not yet rekeyed are done.
	keys     store.IndexCursor
	keysTurn bool
}

// NewReindexer returns the re-indexer of the flows in pool, opening national
// ids with sealer, reading them in format and indexing them with index.
func NewReindexer(pool *pgxpool.Pool, sealer *pii.Sealer, index *nationalid.BlindIndex, format nationalid.Format) *Reindexer {
	return &Reindexer{pool: pool, sealer: sealer, index: index, format: format}
}

// Remaining counts the flows not yet indexed and the subject keys still to
// index. It first brings the planner's statistics up to date, so that every
// batch after it is planned on them.
func (r *Reindexer) Remaining(ctx context.Context) (int64, error) {
	if err := store.Analyze(ctx, r.pool); err != nil {
		return 0, err
	}
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
	indexed := make([]store.Indexed, len(stale))
	for i, f := range stale {
		nationalID, err := r.sealer.Open(f.KeyID, f.NationalIDSealed, store.SealContext(f.ID, "nationalId")...)
		if err != nil {
			return 0, fmt.Errorf("flow %s (key %s): %w", f.ID, f.KeyID, err)
		}
		canonical, _ := r.format.OfKept(nationalID, f.CreatedAt)
		indexed[i] = store.Indexed{Flow: f, Index: r.index.Of(canonical)}
	}
	if err := store.SetPersonIndexes(ctx, r.pool, indexed, r.index.Version()); err != nil {
		return 0, err
	}
	last := stale[len(stale)-1]
	r.cursor = store.IndexCursor{OrganizationID: last.OrganizationID, ID: last.ID}
	return len(stale), nil
}

// reindexSubjectKeys indexes up to limit subject keys that need it, after
// those the previous batches looked at, with the national id each keeps
// sealed under itself; a key that keeps no canonical form is replaced.
func (r *Reindexer) reindexSubjectKeys(ctx context.Context, limit int) (int, error) {
	stale, err := store.UnindexedSubjectKeys(ctx, r.pool, r.index.Version(), r.keys, limit)
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	var indexed []store.SubjectIndexed
	var replaced []int
	keys := make([]subjectkey.Key, len(stale))
	for i, k := range stale {
		key, _, err := subjectkey.OpenRow(r.sealer, k)
		if err != nil {
			return 0, err
		}
		nationalID, err := subjectkey.NationalID(key, k)
		if err != nil {
			return 0, err
		}
		if c, err := r.format.CanonicalAt(nationalID, k.CreatedAt); err != nil || c != nationalID {
			keys[i], replaced = key, append(replaced, i)
			continue
		}
		indexed = append(indexed, store.SubjectIndexed{Key: k, Index: r.index.Of(nationalID)})
	}
	err = database.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		for _, i := range replaced {
			if err := r.replaceTx(ctx, tx, keys[i], stale[i]); err != nil {
				return fmt.Errorf("subject key %s: %w", stale[i].ID, err)
			}
		}
		return store.SetSubjectPersonIndexes(ctx, tx, indexed, r.index.Version())
	})
	if err != nil {
		return 0, err
	}
	last := stale[len(stale)-1]
	r.keys = store.IndexCursor{OrganizationID: last.OrganizationID, ID: last.ID}
	return len(stale), nil
}

// replaceTx moves every flow sealed under old, a key made under a form of
// the id that may name two people, under the key of the person its own id
// names (found or made), its id kept as a create keeps it and the free text
// of its uses with it, and destroys old, emptied. A flow sealed under old meanwhile waits for the lock on it.
func (r *Reindexer) replaceTx(ctx context.Context, tx pgx.Tx, old subjectkey.Key, row store.SubjectKey) error {
	if _, err := store.LockSubjectKey(ctx, tx, row.OrganizationID, row.ID); err != nil {
		return err
	}
	flows, err := store.FlowsUnderKey(ctx, tx, row.OrganizationID, row.ID)
	if err != nil {
		return err
	}
	type opened struct{ nationalID, lastName, person string }
	open := make([]opened, len(flows))
	var people []person
	at := map[string]int{}
	for i, f := range flows {
		nationalID, err := old.Sealer.Open(old.Sealer.KeyID(), f.NationalIDSealed, store.SealContext(f.ID, "nationalId")...)
		if err != nil {
			return fmt.Errorf("flow %s: %w", f.ID, err)
		}
		lastName, err := old.Sealer.Open(old.Sealer.KeyID(), f.LastNameSealed, store.SealContext(f.ID, "lastName")...)
		if err != nil {
			return fmt.Errorf("flow %s: %w", f.ID, err)
		}
		canonical, _ := r.format.OfKept(nationalID, f.CreatedAt)
		open[i] = opened{r.format.Rekeep(nationalID, f.CreatedAt), lastName, canonical}
		if _, ok := at[canonical]; !ok {
			made, keyRow, err := subjectkey.New(r.sealer, r.index, row.OrganizationID, canonical)
			if err != nil {
				return err
			}
			at[canonical] = len(people)
			people = append(people, person{made: made, row: keyRow, subjects: subjectkey.Subjects(r.sealer, row.OrganizationID, canonical)})
		}
	}
	keys, err := keysTx(ctx, tx, r.sealer, people)
	if err != nil {
		return err
	}
	moves := make([]move, len(flows))
	for i, f := range flows {
		key, o := keys[at[open[i].person]], open[i]
		sealed := key.SealFlow(f.ID, o.nationalID, o.lastName)
		if err := store.Rehome(ctx, tx, store.Rehomed{Flow: f, From: row.ID, To: key.ID,
			NationalIDSealed: sealed.NationalID, NationalIDHMAC: sealed.NationalIDHMAC, LastName: sealed.LastName}); err != nil {
			return err
		}
		moves[i] = move{flow: store.FlowKey{OrganizationID: f.OrganizationID, ID: f.ID}, from: &old, to: key}
	}
	if err := moveUsesTx(ctx, tx, moves); err != nil {
		return err
	}
	return store.DestroySubjectKeyIfEmpty(ctx, tx, row.OrganizationID, row.ID)
}
