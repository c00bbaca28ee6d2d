package flows

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/flows/internal/store"
)

// useWriter records the uses of concurrent RecordUse calls of one
// organization together. A use is a transaction of four round trips (begin;
// the count; its flow.used event; commit), mostly waiting and waking; so a
// use that finds its organization's write under way waits, and whichever
// waiting caller gets to write next writes every use waiting, up to
// maxUsesPerWrite, in one transaction, whose begin, count round trip and
// commit they share. With no write under way, a use is written at once.
//
// A shared write waits for no lock longer than sharedLockTimeout, so that a
// use held up (its flow locked by an erasure, its Idempotency-Key by a twin
// request) holds up no other. A shared write that fails for any reason
// leaves each of its uses to its own caller, who writes it alone, in a
// transaction of its own, as long as it takes: a use's failure is its own.
// One organization's uses only: on Citus they stay on one node.
type useWriter struct {
	pool    *pgxpool.Pool
	publish func(ctx context.Context, tx pgx.Tx, w *pendingUse) error

	mu     sync.Mutex
	queues map[string]*useQueue // by organization
}

// maxUsesPerWrite bounds the uses of one transaction, so that the flows it
// holds stay few.
const maxUsesPerWrite = 32

// writeTimeout bounds a shared write, which no single caller's context
// may cut short: it writes the others' uses too.
const writeTimeout = 30 * time.Second

// sharedLockTimeout is how long a statement of a shared write waits for a
// lock before the write gives its uses back to their callers.
const sharedLockTimeout = 100 * time.Millisecond

type useQueue struct {
	slot    chan struct{} // held by the caller writing
	pending []*pendingUse
}

// pendingUse is a use waiting to be written, and then what became of it.
type pendingUse struct {
	count  store.UseCount
	flow   Flow // as read; the count's changes are set on it
	out    Use  // the use as RecordUse answers it
	before []database.BeforeCommit[Use]

	taken bool // under useWriter.mu: a write has it
	alone bool // the shared write failed: the caller writes it alone
	err   error
	done  chan struct{}
}

func newUseWriter(pool *pgxpool.Pool, publish func(ctx context.Context, tx pgx.Tx, w *pendingUse) error) *useWriter {
	return &useWriter{pool: pool, publish: publish, queues: map[string]*useQueue{}}
}

// write records p, with the uses waiting beside it or alone, and returns
// its outcome: errNotCounted when its flow no longer met the count's
// condition.
func (w *useWriter) write(ctx context.Context, p *pendingUse) error {
	if err := w.writeShared(ctx, p); err != nil || !p.alone {
		return err
	}
	if err := w.writeTogether(ctx, []*pendingUse{p}, 0); err != nil {
		return err
	}
	if !p.count.Counted {
		return errNotCounted
	}
	return nil
}

// writeShared has p written by a shared write: its own, or another
// caller's that took it.
func (w *useWriter) writeShared(ctx context.Context, p *pendingUse) error {
	p.done = make(chan struct{})
	w.mu.Lock()
	q := w.queues[p.count.Use.OrganizationID]
	if q == nil {
		q = &useQueue{slot: make(chan struct{}, 1)}
		w.queues[p.count.Use.OrganizationID] = q
	}
	q.pending = append(q.pending, p)
	w.mu.Unlock()
	for {
		select {
		case <-p.done:
			return p.err
		case q.slot <- struct{}{}:
			w.writeWaiting(ctx, q)
			w.mu.Lock()
			taken := p.taken
			w.mu.Unlock()
			if taken {
				<-p.done
				return p.err
			}
			// More were waiting than one write takes: try again.
		}
	}
}

// writeWaiting writes the waiting uses on the slot its caller took, and
// frees the slot even when a hook panics.
func (w *useWriter) writeWaiting(ctx context.Context, q *useQueue) {
	defer func() { <-q.slot }()
	w.mu.Lock()
	n := min(len(q.pending), maxUsesPerWrite)
	batch := make([]*pendingUse, n)
	copy(batch, q.pending[:n])
	q.pending = append(q.pending[:0], q.pending[n:]...)
	for _, p := range batch {
		p.taken = true
	}
	w.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	handed := false
	defer func() {
		if !handed { // a hook panicked: the others must not wait for ever
			for _, p := range batch {
				p.err = errUseWritePanicked
				close(p.done)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	failed := w.writeTogether(ctx, batch, sharedLockTimeout) != nil
	for _, p := range batch {
		switch {
		case failed:
			p.alone = true
		case !p.count.Counted:
			p.err = errNotCounted
		}
		close(p.done)
	}
	handed = true
}

// errUseWritePanicked is what the other uses of a write get when one use's
// hook panicked.
var errUseWritePanicked = errors.New("flows: a use written with this one panicked")

// writeTogether writes batch in one transaction: the counts in one round
// trip, then each counted use's event and before hooks; no statement waits
// for a lock longer than lockTimeout, when above zero.
func (w *useWriter) writeTogether(ctx context.Context, batch []*pendingUse, lockTimeout time.Duration) error {
	counts := make([]*store.UseCount, len(batch))
	for i, p := range batch {
		p.count.Counted = false
		counts[i] = &p.count
	}
	return database.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		if err := store.InsertUses(ctx, tx, counts, lockTimeout); err != nil {
			return err
		}
		for _, p := range batch {
			if !p.count.Counted {
				continue
			}
			c := p.count
			p.flow.Version, p.flow.ProcessStatus, p.flow.UpdatedAt = c.Version, ProcessStatus(c.ProcessStatus), c.UpdatedAt
			p.out.RecordedAt = c.Use.RecordedAt
			if err := w.publish(ctx, tx, p); err != nil {
				return err
			}
			if err := database.RunBeforeCommit(ctx, tx, p.out, p.before); err != nil {
				return err
			}
		}
		return nil
	})
}
