// Package database opens flowd's PostgreSQL pool and owns the two things every
// module shares about it: running a function in a transaction, and telling a
// lost database apart from any other failure.
package database

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
)

// Open connects a pool to url. maxConns 0 keeps pgx's default (the number
// of CPUs, at least 4), raised to at least 8. More is not faster: PostgreSQL
// runs one process per connection, and busy connections beyond its cores
// only take turns (docs/performance.md). The connect timeout, unless the URL
// sets connect_timeout, is short so that a lost database answers 503 quickly
// instead of holding requests.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	return OpenTraced(ctx, url, maxConns, nil)
}

// OpenTraced is Open with tracer, when not nil, told of every statement.
func OpenTraced(ctx context.Context, url string, maxConns int32, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	} else if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "flowd"
	cfg.HealthCheckPeriod = 10 * time.Second
	cfg.MaxConnIdleTime = 5 * time.Minute
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return pool, nil
}

// Querier is what the pool, a connection and a transaction all offer: what
// every store's statements run on, so that a store's function joins the
// caller's transaction or runs on its own alike.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNotFound is what every store returns for a row that does not exist
// (or is not the caller's); the module turns it into its domain's error.
var ErrNotFound = errors.New("database: no such row")

// Beginner starts transactions; *pgxpool.Pool and pgx.Tx both are one.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction that commits when fn returns nil and rolls
// back otherwise. It is the one place flowd begins and commits.
func WithTx(ctx context.Context, db Beginner, fn func(tx pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return Classify(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return Classify(tx.Commit(ctx))
}

// IsUnavailable reports whether err means the database cannot be reached
// (refused, reset, shut down, timed out connecting), as opposed to a bad query.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot connect now.
		return pgErr.Code[:2] == "08" || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	// A connection that closed while a statement was on its way is not safe to
	// retry (the statement may have run), but it is the database going away.
	return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed)
}

// Classify turns an unavailable-database error into an apperr.Unavailable error
// so that the caller answers 503 with Retry-After; other errors pass unchanged.
func Classify(err error) error {
	if err != nil && IsUnavailable(err) {
		if _, ok := apperr.As(err); ok {
			return err
		}
		return apperr.Wrap(err, apperr.Unavailable, "The service is temporarily unavailable. Try again shortly.")
	}
	return err
}

// IsUniqueViolation reports whether err is a unique constraint violation,
// optionally of the named constraint. On Citus a shard's copy of the
// constraint is named after it, with the shard's id (constraint_102075),
// and the coordinator passes a worker's error on without the constraint's
// name, which then comes from the message.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	name := pgErr.ConstraintName
	if name == "" {
		if _, quoted, ok := strings.Cut(pgErr.Message, `"`); ok {
			name, _, _ = strings.Cut(quoted, `"`)
		}
	}
	if constraint == "" || name == constraint {
		return true
	}
	shard, ok := strings.CutPrefix(name, constraint+"_")
	return ok && shard != "" && strings.Trim(shard, "0123456789") == ""
}

// Tx is the transaction a …Tx method of a module joins. It is pgx's, named
// here so that a module's domain file need not import pgx.
type Tx = pgx.Tx

// SharedRead is a read one module sends in one round trip, to which another
// module adds a statement of its own (each reads its own tables), so that a
// request that needs both costs one round trip, not two. The statements of
// a round trip share its snapshot and its fate: one that fails fails them
// all, so a statement added must not fail for any argument it is given.
type SharedRead interface {
	// QueueRow adds a statement that returns at most one row; scan reads it
	// once the round trip's results arrive (with no row, its Scan returns
	// pgx.ErrNoRows). scan is not called when the read failed before it;
	// its error is the read's.
	QueueRow(sql string, args []any, scan func(Row) error)
}

// Row is the one row of a statement, or none.
type Row interface {
	Scan(dest ...any) error
}

// BeforeCommit is work a caller joins to a module's write: the module runs it
// in the write's own transaction, after its change and before it commits,
// with what the change produced (done). When it fails, the change is rolled
// back and the module's method returns its error, so that the two commit
// together or not at all. The console uses it to record a staff action in the
// audit log in the transaction of the action, the API to keep its answer to
// an Idempotency-Key in the transaction of the change it answers.
//
// It is the one shape flowd's modules take such work in: a trailing variadic
// parameter "before ...database.BeforeCommit[T]" of the method that makes the
// change, T being what that method returns. Why this shape and not another:
//   - Not a …Tx form of each write (the caller begins and commits): the
//     module's write is followed by work only the module knows and that must
//     follow the commit (identity drops cached clients and organizations),
//     which a …Tx form would hand to every caller.
//   - Not a field on each input: Cancel and Delete take ids, not inputs, and
//     one shape for every module keeps callers uniform.
//   - done, because the record names what was done (a reference, a client's
//     name) that the caller learns only from the change itself.
//   - Variadic, so that the API and the CLI call the same methods unchanged.
type BeforeCommit[T any] func(ctx context.Context, tx Tx, done T) error

// RunBeforeCommit runs hooks in order in tx, stopping at the first error.
func RunBeforeCommit[T any](ctx context.Context, tx Tx, done T, hooks []BeforeCommit[T]) error {
	for _, h := range hooks {
		if h == nil {
			continue
		}
		if err := h(ctx, tx, done); err != nil {
			return err
		}
	}
	return nil
}
