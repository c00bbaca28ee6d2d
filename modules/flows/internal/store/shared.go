package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/cache"
	"github.com/flowd/flowd/internal/database"
)

// SharedReads sends the reads of concurrent requests in shared round trips.
//
// A read (a retrieve, a list page) is one pipeline of statements: one round
// trip. Under load, much of a round trip's cost on both sides is waking the
// process at the other end. So a read that finds every slot for a round trip
// taken waits with the others that do, and whichever of them gets the next
// slot sends them all, up to maxShared, as one pipeline. With a slot free, a
// read goes alone and at once.
//
// Reads in one pipeline share its implicit transaction: they see one
// snapshot, and a round trip that fails (a lost connection) fails each of
// them, as it would have failed each alone. So no statement of a shared read
// may fail on its own: callers check their arguments before they queue them
// (ids are UUIDs, texts valid UTF-8 without NUL), and an unknown row is an
// empty result, not an error.
type SharedReads struct {
	db      DB
	slots   chan struct{}   // one per round trip in flight
	observe func(reads int) // told the reads of each round trip

	mu      sync.Mutex
	pending []*sharedRead

	positions *cache.Map[flowRef, time.Time] // of list cursors

	// generic is whether the round trips ask for generic plans, once known:
	// not on Citus (see genericPlansSQL).
	generic atomic.Pointer[bool]
}

// maxShared bounds the reads of one round trip, so that one pipeline stays
// short and the other slots get work too.
const maxShared = 16

// sendTimeout bounds a shared round trip, which no single caller's context
// may cut short.
const sendTimeout = 30 * time.Second

type sharedRead struct {
	queue func(*pgx.Batch)
	read  func(pgx.BatchResults) error
	taken bool // under SharedReads.mu: a sender has it
	done  chan struct{}
	err   error
}

// NewSharedReads sends reads on db with at most slots round trips in
// flight: the pool's connections. observe, when not nil, is told how many
// reads each round trip carried.
func NewSharedReads(db DB, slots int, observe func(reads int)) *SharedReads {
	if observe == nil {
		observe = func(int) {}
	}
	return &SharedReads{db: db, slots: make(chan struct{}, max(1, slots)), observe: observe,
		positions: cache.New[flowRef, time.Time](maxPositions)}
}

// genericPlansSQL makes PostgreSQL run the statements after it in the
// round trip's transaction with their generic plans. Each read walks an
// index from its organization's key, so one plan serves every organization;
// but the first few runs of a statement are planned for their arguments,
// and when one organization holds most rows, those custom plans look
// cheaper than the generic one (made for an organization of average size),
// and PostgreSQL goes on planning the statement anew on every call: a deep
// list page then cost PostgreSQL twice what it costs planned once. Citus
// cannot plan a statement with a subquery generically, and a flow's reads
// take its subject key in sub-queries: on Citus the round trips leave the
// plans to PostgreSQL, which Citus steers to plans made for the arguments.
const genericPlansSQL = `select set_config('plan_cache_mode', 'force_generic_plan', true)`

// citusSQL tells whether the database is a Citus coordinator.
const citusSQL = `select exists (select 1 from pg_extension where extname = 'citus')`

// genericPlans reports whether round trips ask for generic plans: whether
// the database is not Citus, asked once.
func (s *SharedReads) genericPlans(ctx context.Context) (bool, error) {
	if g := s.generic.Load(); g != nil {
		return *g, nil
	}
	var citus bool
	if err := s.db.QueryRow(ctx, citusSQL).Scan(&citus); err != nil {
		return false, err
	}
	generic := !citus
	s.generic.Store(&generic)
	return generic, nil
}

// Do sends the statements queue queues, in a round trip it may share, and
// gives their results to read, in order. read need not read them all: those
// it leaves are read past, and those queued with a function of their own
// (pgx.QueuedQuery.QueryRow) run it when read returned nil; its error is
// Do's then. A caller whose ctx ends before a round trip takes its read gets
// ctx's error; once taken, the read runs to its end (the round trip has its
// own timeout) and Do returns its result, because read writes the caller's
// variables.
func (s *SharedReads) Do(ctx context.Context, queue func(*pgx.Batch), read func(pgx.BatchResults) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	me := &sharedRead{queue: queue, read: read, done: make(chan struct{})}
	s.mu.Lock()
	s.pending = append(s.pending, me)
	s.mu.Unlock()
	for {
		select {
		case <-me.done:
			return me.err
		case <-ctx.Done():
			if s.withdraw(me) {
				return ctx.Err()
			}
			<-me.done // a round trip has it
			return me.err
		case s.slots <- struct{}{}:
			s.sendWaiting(ctx)
			s.mu.Lock()
			taken := me.taken
			s.mu.Unlock()
			if taken {
				<-me.done // its round trip is sent or being sent
				return me.err
			}
			// More were waiting than one round trip takes: try again.
		}
	}
}

// sendWaiting sends the waiting reads on the slot its caller took, and
// frees the slot even when a read's code panics.
func (s *SharedReads) sendWaiting(ctx context.Context) {
	defer func() { <-s.slots }()
	if batch := s.take(); len(batch) > 0 {
		s.send(ctx, batch)
	}
}

// take hands the waiting reads, up to maxShared, to a sender.
func (s *SharedReads) take() []*sharedRead {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.pending), maxShared)
	batch := make([]*sharedRead, n)
	copy(batch, s.pending[:n])
	s.pending = append(s.pending[:0], s.pending[n:]...)
	for _, x := range batch {
		x.taken = true
	}
	return batch
}

// withdraw drops a read whose caller gave up and reports whether it did:
// a read a round trip has taken stays.
func (s *SharedReads) withdraw(me *sharedRead) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.pending {
		if x == me {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			return true
		}
	}
	return false
}

// errReadPanicked is what the other reads of a round trip get when one
// read's code panicked while the results were handed out.
var errReadPanicked = errors.New("store: a read sharing the round trip panicked")

// send sends batch as one pipeline and hands each read its results.
func (s *SharedReads) send(ctx context.Context, batch []*sharedRead) {
	handed := false
	defer func() {
		// A panic in one read's code goes on up the sender's request; the
		// others must not wait for ever.
		if !handed {
			for _, x := range batch {
				x.err = errReadPanicked
				close(x.done)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	s.observe(len(batch))
	generic, err := s.genericPlans(ctx)
	if err != nil {
		for _, x := range batch {
			x.err = err
			close(x.done)
		}
		handed = true
		return
	}
	var b pgx.Batch
	if generic {
		b.Queue(genericPlansSQL)
	} else {
		b.Queue(`select 1`) // in its place, so that the reads' results start after it
	}
	ends := make([]int, len(batch))
	for i, x := range batch {
		x.queue(&b)
		ends[i] = b.Len()
	}
	br := s.db.SendBatch(ctx, &b)
	defer br.Close() // after a panic, so that the connection goes back to the pool
	_, err = br.Exec()
	start := 1
	for i, x := range batch {
		x.err = readShare(br, &b, start, ends[i], x.read)
		start = ends[i]
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	for _, x := range batch {
		if x.err == nil && err != nil {
			x.err = err
		}
		close(x.done)
	}
	handed = true
}

// readShare runs read on the results of b's statements from start up to
// end, then reads past what it left.
func readShare(br pgx.BatchResults, b *pgx.Batch, start, end int, read func(pgx.BatchResults) error) error {
	c := &countedResults{BatchResults: br}
	err := read(c)
	for start+c.n < end {
		before := c.n
		if fn := b.QueuedQueries[start+c.n].Fn; fn != nil && err == nil {
			err = fn(c)
		}
		if c.n == before {
			_, _ = c.Exec()
		}
	}
	return err
}

// countedResults counts the results a read takes, so that the next read
// starts at its own; closing is left to the sender.
type countedResults struct {
	pgx.BatchResults
	n int
}

func (c *countedResults) Exec() (pgconn.CommandTag, error) {
	c.n++
	return c.BatchResults.Exec()
}

func (c *countedResults) Query() (pgx.Rows, error) {
	c.n++
	return c.BatchResults.Query()
}

func (c *countedResults) QueryRow() pgx.Row {
	c.n++
	return c.BatchResults.QueryRow()
}

func (c *countedResults) Close() error { return nil }

// GetFlowAndIncidents returns a flow of organizationID and its open
// incidents, read in one round trip that concurrent reads may share. also,
// when not nil, adds another module's statements to the same read, which
// that module reads through the functions it gives them; they have run when
// it returns without error, and their error is its. They are skipped when
// the flow is not found. id must be a UUID. database.ErrNotFound.
func (s *SharedReads) GetFlowAndIncidents(ctx context.Context, organizationID, id string, also func(database.SharedRead)) (Flow, []Incident, error) {
	var (
		f         Flow
		incidents []Incident
	)
	err := s.Do(ctx, func(b *pgx.Batch) {
		b.Queue(flowByIDSQL, organizationID, id)
		b.Queue(openIncidentsSQL, organizationID, []string{id})
		if also != nil {
			also(batchRead{b})
		}
	}, func(br pgx.BatchResults) error {
		var err error
		if f, err = flowRows.one(br.Query()); err != nil {
			return err
		}
		incidents, err = incidentRows.all(br.Query())
		return err
	})
	return f, incidents, err
}

// GetFlow returns a flow of organizationID, read in a round trip that
// concurrent reads may share. id must be a UUID. database.ErrNotFound.
func (s *SharedReads) GetFlow(ctx context.Context, organizationID, id string) (Flow, error) {
	var f Flow
	err := s.Do(ctx, func(b *pgx.Batch) { b.Queue(flowByIDSQL, organizationID, id) }, func(br pgx.BatchResults) error {
		var err error
		f, err = flowRows.one(br.Query())
		return err
	})
	return f, err
}

// OpenIncidentsWith returns a flow's open incidents, read in one round trip
// with another module's statements, which also adds (as for
// GetFlowAndIncidents). db is the transaction of a change that wants the
// flow as a retrieve would show it.
func OpenIncidentsWith(ctx context.Context, db DB, organizationID, id string, also func(database.SharedRead)) ([]Incident, error) {
	var incidents []Incident
	b := &pgx.Batch{}
	b.Queue(openIncidentsSQL, organizationID, []string{id}).Query(func(rows pgx.Rows) error {
		var err error
		incidents, err = incidentRows.all(rows, nil)
		return err
	})
	also(batchRead{b})
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return incidents, nil
}

// batchRead is the database.SharedRead of a round trip's batch.
type batchRead struct{ b *pgx.Batch }

func (r batchRead) QueueRow(sql string, args []any, scan func(database.Row) error) {
	r.b.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return scan(row) })
}
