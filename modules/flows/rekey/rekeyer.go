package rekey

import (
	"context"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/store"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// Rekeyer moves the personal data of flows made before per-person keys
// under the subject key of their person, for "flowd flows rekey". It needs
// none of the collaborators the module serves with.
type Rekeyer struct {
	pool   *pgxpool.Pool
	sealer *pii.Sealer
	index  *nationalid.BlindIndex
	format nationalid.Format
	cursor store.IndexCursor
	// uses is where it stands among the uses whose text is still as
	// written, once every flow is under its person's key.
	uses store.IndexCursor
}

// NewRekeyer returns the rekeyer of the flows in pool, opening and sealing
// with sealer, telling people apart by the canonical forms of format and
// indexing the new subject keys with index (nil: none).
func NewRekeyer(pool *pgxpool.Pool, sealer *pii.Sealer, index *nationalid.BlindIndex, format nationalid.Format) *Rekeyer {
	return &Rekeyer{pool: pool, sealer: sealer, index: index, format: format}
}

// Remaining counts the flows still sealed under a data key, and the uses
// whose free text is still as written. It first brings the planner's
// statistics up to date, so that every batch after it is planned on them.
func (r *Rekeyer) Remaining(ctx context.Context) (int64, error) {
	if err := store.Analyze(ctx, r.pool); err != nil {
		return 0, err
	}
	flows, err := store.CountUnkeyed(ctx, r.pool)
	if err != nil {
		return 0, err
	}
	uses, err := store.CountPlainUses(ctx, r.pool)
	return flows + uses, err
}

// RekeyBatch moves up to limit flows still sealed under a data key, after
// those the previous batches looked at in the primary key's order, under
// their person's subject key (found or made as a create does), with the
// free text of their uses, in one transaction, and returns how many it
// found; once every flow is under a key, it seals up to limit uses recorded
// before their text was sealed. 0 means it has been through every flow
// and use. A row is written back only while it is sealed as it was
// read, so it is safe beside live traffic and a re-seal, and a run that
// stops half way, however it stops, is simply run again: what committed is
// not looked at again, and what did not is done anew.
func (r *Rekeyer) RekeyBatch(ctx context.Context, limit int) (int, error) {
	stale, err := store.UnkeyedFlows(ctx, r.pool, r.cursor, limit)
	if err != nil {
		return 0, err
	}
	if len(stale) == 0 {
		n, cursor, err := sealPlainUses(ctx, r.pool, r.sealer, r.uses, limit)
		r.uses = cursor
		return n, err
	}
	b, err := r.open(stale)
	if err != nil {
		return 0, err
	}
	if err := database.WithTx(ctx, r.pool, func(tx pgx.Tx) error { return b.moveTx(ctx, tx, r.sealer) }); err != nil {
		return 0, err
	}
	last := stale[len(stale)-1]
	r.cursor = store.IndexCursor{OrganizationID: last.OrganizationID, ID: last.ID}
	return len(stale), nil
}

// batch is the flows of a batch, opened, and their people, each once: a
// person with several flows in it has one key.
type batch struct {
	flows  []store.SealedFlow
	opened []opened
	people []person
	at     map[string]int // a person's place in people, by their name
	keys   []subjectkey.Key
}

// opened is a flow's personal data and the name of its person.
type opened struct{ nationalID, lastName, person string }

// open opens the flows of stale and makes a key for each of their people.
func (r *Rekeyer) open(stale []store.SealedFlow) (*batch, error) {
	b := &batch{flows: stale, opened: make([]opened, len(stale)), at: map[string]int{}}
	for i, f := range stale {
		nationalID, err := r.sealer.Open(f.KeyID, f.NationalIDSealed, store.SealContext(f.ID, "nationalId")...)
		if err != nil {
			return nil, fmt.Errorf("flow %s (key %s): %w", f.ID, f.KeyID, err)
		}
		lastName, err := r.sealer.Open(f.KeyID, f.LastNameSealed, store.SealContext(f.ID, "lastName")...)
		if err != nil {
			return nil, fmt.Errorf("flow %s (key %s): %w", f.ID, f.KeyID, err)
		}
		canonical, _ := r.format.OfKept(nationalID, f.CreatedAt)
		name := f.OrganizationID + "\x00" + canonical
		b.opened[i] = opened{r.format.Rekeep(nationalID, f.CreatedAt), lastName, name}
		if _, ok := b.at[name]; !ok {
			made, row, err := subjectkey.New(r.sealer, r.index, f.OrganizationID, canonical)
			if err != nil {
				return nil, err
			}
			b.at[name] = len(b.people)
			b.people = append(b.people, person{made: made, row: row, subjects: subjectkey.Subjects(r.sealer, f.OrganizationID, canonical)})
		}
	}
	b.keys = make([]subjectkey.Key, len(b.people))
	return b, nil
}

// keyOf is the key of flow i's person.
func (b *batch) keyOf(i int) subjectkey.Key { return b.keys[b.at[b.opened[i].person]] }

// rekeyed seals the flows at places under their people's keys.
func (b *batch) rekeyed(places []int) []store.Rekeyed {
	out := make([]store.Rekeyed, len(places))
	for j, i := range places {
		key, o := b.keyOf(i), b.opened[i]
		sealed := key.SealFlow(b.flows[i].ID, o.nationalID, o.lastName)
		out[j] = store.Rekeyed{Flow: b.flows[i], SubjectKeyID: key.ID,
			NationalIDSealed: sealed.NationalID, NationalIDHMAC: sealed.NationalIDHMAC, LastName: sealed.LastName}
	}
	return out
}

// moveTx moves the batch's flows, with their uses, under their people's
// keys in tx. Flows made before per-person keys are mostly of people who
// have no key yet: each person's new key is inserted, and their flows
// sealed under it, in one round trip. The flows of those who had a key are
// sealed under theirs in two more.
func (b *batch) moveTx(ctx context.Context, tx pgx.Tx, sealer *pii.Sealer) error {
	newKeys := make([]store.NewSubjectKey, len(b.people))
	for i, p := range b.people {
		b.keys[i], newKeys[i] = p.made, store.NewSubjectKey{Key: p.row, Subjects: p.subjects}
	}
	all := make([]int, len(b.flows))
	for i := range all {
		all[i] = i
	}
	moved, err := store.Rekey(ctx, tx, newKeys, b.rekeyed(all))
	if err != nil {
		return err
	}
	var left, leftPeople []int
	seen := map[int]bool{}
	for i, f := range b.flows {
		if moved[f.ID] {
			continue
		}
		left = append(left, i)
		if p := b.at[b.opened[i].person]; !seen[p] {
			seen[p] = true
			leftPeople = append(leftPeople, p)
		}
	}
	if len(left) > 0 {
		again := make([]person, len(leftPeople))
		for j, p := range leftPeople {
			again[j] = b.people[p]
		}
		found, err := keysTx(ctx, tx, sealer, again)
		if err != nil {
			return err
		}
		for j, p := range leftPeople {
			b.keys[p] = found[j]
		}
		more, err := store.Rekey(ctx, tx, nil, b.rekeyed(left))
		if err != nil {
			return err
		}
		maps.Copy(moved, more)
	}
	var moves []move
	for i, f := range b.flows {
		if moved[f.ID] {
			moves = append(moves, move{flow: store.FlowKey{OrganizationID: f.OrganizationID, ID: f.ID}, to: b.keyOf(i)})
		}
	}
	return moveUsesTx(ctx, tx, moves)
}

// person is one person of a batch: the key made for them, kept unless
// they have one already.
type person struct {
	made     subjectkey.Key
	row      store.SubjectKey
	subjects [][]byte
}

// keysTx finds or makes, in tx, the subject key of each person, in one
// round trip (and one more for each whose key a concurrent insert made).
func keysTx(ctx context.Context, tx pgx.Tx, sealer *pii.Sealer, people []person) ([]subjectkey.Key, error) {
	rows := make([]store.SubjectKey, len(people))
	subjects := make([][][]byte, len(people))
	for i, p := range people {
		rows[i], subjects[i] = p.row, p.subjects
	}
	stored, err := store.FindOrInsertSubjectKeys(ctx, tx, rows, subjects)
	if err != nil {
		return nil, fmt.Errorf("subject keys: %w", err)
	}
	out := make([]subjectkey.Key, len(people))
	for i, p := range people {
		if stored[i].ID == "" {
			if stored[i], err = store.FindOrInsertSubjectKey(ctx, tx, p.row, p.subjects); err != nil {
				return nil, fmt.Errorf("subject key: %w", err)
			}
		}
		if stored[i].ID == p.made.ID {
			out[i] = p.made
			continue
		}
		if out[i], _, err = subjectkey.OpenRow(sealer, stored[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
