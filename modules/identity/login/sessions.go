package login

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/login/internal/store"
)

// Sessions keeps the sessions the server can end (identity.Sessions) in
// login_sessions. Every instance reads a session's row at each request
// that carries its cookie, so an ended session is refused everywhere at
// its next request.
type Sessions struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	now  func() time.Time
}

var _ identity.Sessions = (*Sessions)(nil)

// SessionsConfig configures Sessions.
type SessionsConfig struct {
	Log *slog.Logger
	// Now is the clock of listings and the sweep; time.Now when nil.
	Now func() time.Time
}

// NewSessions returns the session records on pool.
func NewSessions(pool *pgxpool.Pool, cfg SessionsConfig) (*Sessions, error) {
	if pool == nil || cfg.Log == nil {
		return nil, errors.New("login: NewSessions needs a pool and a logger")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Sessions{pool: pool, log: cfg.Log, now: cfg.Now}, nil
}

// listLimit bounds a listing of sessions; an organization with more live
// sessions sees the first ones by person.
const listLimit = 1000

// StartSession implements identity.Sessions.
func (s *Sessions) StartSession(ctx context.Context, n identity.NewSession) (identity.Session, error) {
	if err := n.Validate(); err != nil {
		return identity.Session{}, err
	}
	return store.InsertSession(ctx, s.pool, n)
}

// SessionByToken implements identity.Sessions.
func (s *Sessions) SessionByToken(ctx context.Context, token string) (identity.Session, bool, error) {
	if token == "" {
		return identity.Session{}, false, nil
	}
	return store.SessionByToken(ctx, s.pool, token)
}

// TouchSession implements identity.Sessions.
func (s *Sessions) TouchSession(ctx context.Context, id string, now, idleUntil time.Time) error {
	return store.TouchSession(ctx, s.pool, id, now, idleUntil)
}

// EndSessionByToken implements identity.Sessions.
func (s *Sessions) EndSessionByToken(ctx context.Context, token string, before ...database.BeforeCommit[[]identity.Session]) ([]identity.Session, error) {
	return s.end(ctx, before, func(tx pgx.Tx) ([]identity.Session, error) { return store.EndSessionByToken(ctx, tx, token) })
}

// EndReplacedSession implements identity.Sessions.
func (s *Sessions) EndReplacedSession(ctx context.Context, token string, before ...database.BeforeCommit[[]identity.Session]) ([]identity.Session, error) {
	return s.end(ctx, before, func(tx pgx.Tx) ([]identity.Session, error) { return store.EndOneSessionByToken(ctx, tx, token) })
}

// ListSessions implements identity.Sessions.
func (s *Sessions) ListSessions(ctx context.Context, organizationID string, owner *identity.SessionOwner) ([]identity.Session, error) {
	return store.ListSessions(ctx, s.pool, organizationID, owner, s.now(), listLimit)
}

// Session implements identity.Sessions.
func (s *Sessions) Session(ctx context.Context, organizationID, id string) (identity.Session, error) {
	if uuid.Validate(id) != nil {
		return identity.Session{}, identity.ErrSessionNotFound
	}
	one, ok, err := store.LiveSession(ctx, s.pool, organizationID, id, s.now())
	if err == nil && !ok {
		err = identity.ErrSessionNotFound
	}
	return one, err
}

// EndSession implements identity.Sessions.
func (s *Sessions) EndSession(ctx context.Context, organizationID, id string, before ...database.BeforeCommit[[]identity.Session]) ([]identity.Session, error) {
	if uuid.Validate(id) != nil {
		return nil, identity.ErrSessionNotFound
	}
	ended, err := s.end(ctx, before, func(tx pgx.Tx) ([]identity.Session, error) {
		ended, err := store.EndSession(ctx, tx, organizationID, id)
		if err == nil && len(ended) == 0 {
			err = identity.ErrSessionNotFound
		}
		return ended, err
	})
	return ended, err
}

// EndSessionsOf implements identity.Sessions.
func (s *Sessions) EndSessionsOf(ctx context.Context, owner identity.SessionOwner, keep string, before ...database.BeforeCommit[[]identity.Session]) ([]identity.Session, error) {
	if keep != "" && uuid.Validate(keep) != nil {
		return nil, identity.ErrSessionNotFound
	}
	return s.end(ctx, before, func(tx pgx.Tx) ([]identity.Session, error) { return store.EndSessionsOf(ctx, tx, owner, keep) })
}

// end deletes sessions with del and runs before with them, in one transaction.
func (s *Sessions) end(ctx context.Context, before []database.BeforeCommit[[]identity.Session], del func(pgx.Tx) ([]identity.Session, error)) ([]identity.Session, error) {
	var ended []identity.Session
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if ended, err = del(tx); err != nil {
			return err
		}
		return database.RunBeforeCommit(ctx, tx, ended, before)
	})
	if err != nil {
		return nil, err
	}
	return ended, nil
}

// SweepExpired deletes the sessions that timed out and says how many.
func (s *Sessions) SweepExpired(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := store.DeleteExpiredSessions(ctx, s.pool, s.now())
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// sweepInterval is how often Run deletes timed-out sessions; they admit
// nothing meanwhile, since every read checks the deadlines.
const sweepInterval = 10 * time.Minute

// Run deletes timed-out sessions every sweepInterval until ctx ends, then
// returns nil; a failed sweep is logged and tried again at the next.
func (s *Sessions) Run(ctx context.Context) error {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := s.SweepExpired(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("login: sweeping timed-out sessions", "error", err)
		}
	}
}
