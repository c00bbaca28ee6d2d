package database

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Rows are the rows of a statement. They are pgx's, named here so that a
// module's domain file need not import pgx.
type Rows = pgx.Rows

// Batcher sends batches; *pgxpool.Pool and pgx.Tx both are one.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Batch is statements of several modules sent in one round trip: each
// module queues its own (each reads or writes its own tables) and reads its
// answers once Send returns. Sent outside a transaction, they run in one
// implicit transaction of their own: what they write commits together, and
// a statement that fails rolls them all back and fails the batch.
type Batch struct{ b pgx.Batch }

var _ SharedRead = (*Batch)(nil)

// QueueRow implements SharedRead.
func (b *Batch) QueueRow(sql string, args []any, scan func(Row) error) {
	b.b.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return scan(row) })
}

// QueueRows adds a statement that returns any number of rows; scan reads
// them once the round trip's results arrive. scan is not called when the
// batch failed before it.
func (b *Batch) QueueRows(sql string, args []any, scan func(Rows) error) {
	b.b.Queue(sql, args...).Query(scan)
}

// QueueExec adds a statement whose rows, if any, are not read.
func (b *Batch) QueueExec(sql string, args []any) {
	b.b.Queue(sql, args...)
}

// Len is how many statements are queued.
func (b *Batch) Len() int { return b.b.Len() }

// Send sends the queued statements on db in one round trip, a pool's or a
// transaction's, and reads every answer; it returns the first error. A
// batch with nothing queued sends nothing.
func (b *Batch) Send(ctx context.Context, db Batcher) error {
	if b.b.Len() == 0 {
		return nil
	}
	return Classify(db.SendBatch(ctx, &b.b).Close())
}
