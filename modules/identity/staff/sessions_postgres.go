package staff

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/staff/internal/store"
)

// SessionStore keeps the sessions the server can end (Sessions) in
// login_sessions. Every instance reads a session's row at each request
// that carries its cookie, so an ended session is refused everywhere at
// its next request.
type SessionStore struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	now  func() time.Time
}

var _ Sessions = (*SessionStore)(nil)

// SessionsConfig configures SessionStore.
type SessionsConfig struct {
	Log *slog.Logger
	// Now is the clock of listings and the sweep; time.Now when nil.
	Now func() time.Time
}

// NewSessions returns the session records on pool.
func NewSessions(pool *pgxpool.Pool, cfg SessionsConfig) (*SessionStore, error) {
	if pool == nil || cfg.Log == nil {
		return nil, errors.New("staff: NewSessions needs a pool and a logger")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &SessionStore{pool: pool, log: cfg.Log, now: cfg.Now}, nil
}

// listLimit bounds a listing of sessions; an organization with more live
// sessions sees the first ones by person.
const listLimit = 1000

// StartSession implements Sessions.
func (s *SessionStore) StartSession(ctx context.Context, n NewSession) (Session, error) {
	if err := n.Validate(); err != nil {
		return Session{}, err
	}
	row, err := store.InsertSession(ctx, s.pool, fromSession(n.Session), n.Token)
	return toSession(row), err
}

// SessionByToken implements Sessions.
func (s *SessionStore) SessionByToken(ctx context.Context, token string) (Session, bool, error) {
	if token == "" {
		return Session{}, false, nil
	}
	row, ok, err := store.SessionByToken(ctx, s.pool, token)
	return toSession(row), ok, err
}

// TouchSession implements Sessions.
func (s *SessionStore) TouchSession(ctx context.Context, id string, now, idleUntil time.Time) error {
	return store.TouchSession(ctx, s.pool, id, now, idleUntil)
}

// EndSessionByToken implements Sessions.
func (s *SessionStore) EndSessionByToken(ctx context.Context, token string, before ...database.BeforeCommit[[]Session]) ([]Session, error) {
	return s.end(ctx, before, func(tx pgx.Tx) ([]store.Session, error) { return store.EndSessionByToken(ctx, tx, token) })
}

// EndReplacedSession implements Sessions.
func (s *SessionStore) EndReplacedSession(ctx context.Context, token string, before ...database.BeforeCommit[[]Session]) ([]Session, error) {
	return s.end(ctx, before, func(tx pgx.Tx) ([]store.Session, error) { return store.EndOneSessionByToken(ctx, tx, token) })
}

// ListSessions implements Sessions.
func (s *SessionStore) ListSessions(ctx context.Context, organizationID string, owner *SessionOwner) ([]Session, error) {
	var issuer, subject string
	if owner != nil {
		issuer, subject = owner.Issuer, owner.Subject
	}
	rows, err := store.ListSessions(ctx, s.pool, organizationID, issuer, subject, s.now(), listLimit)
	return toSessions(rows), err
}

// Session implements Sessions.
func (s *SessionStore) Session(ctx context.Context, organizationID, id string) (Session, error) {
	if uuid.Validate(id) != nil {
		return Session{}, ErrSessionNotFound
	}
	one, ok, err := store.LiveSession(ctx, s.pool, organizationID, id, s.now())
	if err == nil && !ok {
		err = ErrSessionNotFound
	}
	return toSession(one), err
}

// EndSession implements Sessions.
func (s *SessionStore) EndSession(ctx context.Context, organizationID, id string, before ...database.BeforeCommit[[]Session]) ([]Session, error) {
	if uuid.Validate(id) != nil {
		return nil, ErrSessionNotFound
	}
	ended, err := s.end(ctx, before, func(tx pgx.Tx) ([]store.Session, error) {
		ended, err := store.EndSession(ctx, tx, organizationID, id)
		if err == nil && len(ended) == 0 {
			err = ErrSessionNotFound
		}
		return ended, err
	})
	return ended, err
}

// EndSessionsOf implements Sessions.
func (s *SessionStore) EndSessionsOf(ctx context.Context, owner SessionOwner, keep string, before ...database.BeforeCommit[[]Session]) ([]Session, error) {
	if keep != "" && uuid.Validate(keep) != nil {
		return nil, ErrSessionNotFound
	}
	return s.end(ctx, before, func(tx pgx.Tx) ([]store.Session, error) {
		return store.EndSessionsOf(ctx, tx, owner.OrganizationID, owner.Issuer, owner.Subject, keep)
	})
}

// end deletes sessions with del and runs before with them, in one transaction.
func (s *SessionStore) end(ctx context.Context, before []database.BeforeCommit[[]Session], del func(pgx.Tx) ([]store.Session, error)) ([]Session, error) {
	var ended []Session
	err := database.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := del(tx)
		if err != nil {
			return err
		}
		ended = toSessions(rows)
		return database.RunBeforeCommit(ctx, tx, ended, before)
	})
	if err != nil {
		return nil, err
	}
	return ended, nil
}

// SweepExpired deletes the sessions that timed out and says how many.
func (s *SessionStore) SweepExpired(ctx context.Context) (int64, error) {
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
func (s *SessionStore) Run(ctx context.Context) error {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := s.SweepExpired(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "staff: sweeping timed-out sessions", "error", err)
		}
	}
}

// endStaffSessions deletes every session of a built-in staff account in tx.
func endStaffSessions(ctx context.Context, tx pgx.Tx, staffID string) ([]Session, error) {
	rows, err := store.EndStaffSessionsTx(ctx, tx, staffID)
	return toSessions(rows), err
}

// toSession is a stored session as the domain knows it.
func toSession(r store.Session) Session {
	return Session{ID: r.ID, Kind: SessionKind(r.Kind), Issuer: r.Issuer, Subject: r.Subject, StaffID: r.StaffID,
		OrganizationID: r.OrganizationID, Username: r.Username, ProviderSessionID: r.ProviderSessionID,
		UserAgent: r.UserAgent, Address: r.Address, CreatedAt: r.CreatedAt, LastSeenAt: r.LastSeenAt,
		IdleUntil: r.IdleUntil, ExpiresAt: r.ExpiresAt}
}

func toSessions(rows []store.Session) []Session {
	if rows == nil {
		return nil
	}
	out := make([]Session, len(rows))
	for i, r := range rows {
		out[i] = toSession(r)
	}
	return out
}

// fromSession is a new session as the store takes it.
func fromSession(s Session) store.Session {
	return store.Session{ID: s.ID, Kind: string(s.Kind), Issuer: s.Issuer, Subject: s.Subject, StaffID: s.StaffID,
		OrganizationID: s.OrganizationID, Username: s.Username, ProviderSessionID: s.ProviderSessionID,
		UserAgent: s.UserAgent, Address: s.Address, CreatedAt: s.CreatedAt, LastSeenAt: s.LastSeenAt,
		IdleUntil: s.IdleUntil, ExpiresAt: s.ExpiresAt}
}
