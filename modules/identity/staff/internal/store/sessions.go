package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// sessionRow is a row of login_sessions (migrations/026_sessions.sql).
type sessionRow struct {
	ID                string    `db:"id"`
	Kind              string    `db:"kind"`
	Issuer            string    `db:"issuer"`
	Subject           string    `db:"subject"`
	StaffID           *string   `db:"staff_id"`
	OrganizationID    string    `db:"organization_id"`
	Username          string    `db:"username"`
	ProviderSessionID *string   `db:"provider_session_id"`
	UserAgent         string    `db:"user_agent"`
	Address           string    `db:"address"`
	CreatedAt         time.Time `db:"created_at"`
	LastSeenAt        time.Time `db:"last_seen_at"`
	IdleUntil         time.Time `db:"idle_until"`
	ExpiresAt         time.Time `db:"expires_at"`
}

// Session is a session as stored, but for its token's hash.
type Session struct {
	ID                string
	Kind              string
	Issuer            string
	Subject           string
	StaffID           string
	OrganizationID    string
	Username          string
	ProviderSessionID string
	UserAgent         string
	Address           string
	CreatedAt         time.Time
	LastSeenAt        time.Time
	IdleUntil         time.Time
	ExpiresAt         time.Time
}

func (r sessionRow) session() Session {
	s := Session{ID: r.ID, Kind: r.Kind, Issuer: r.Issuer, Subject: r.Subject,
		OrganizationID: r.OrganizationID, Username: r.Username, UserAgent: r.UserAgent, Address: r.Address,
		CreatedAt: r.CreatedAt, LastSeenAt: r.LastSeenAt, IdleUntil: r.IdleUntil, ExpiresAt: r.ExpiresAt}
	if r.StaffID != nil {
		s.StaffID = *r.StaffID
	}
	if r.ProviderSessionID != nil {
		s.ProviderSessionID = *r.ProviderSessionID
	}
	return s
}

// sessionColumns are the columns of a sessionRow, each prefixed (with a
// table's alias, or "").
func sessionColumns(prefix string) string {
	cols := []string{"id::text", "kind", "issuer", "subject", "staff_id::text", "organization_id", "username",
		"provider_session_id::text", "user_agent", "address", "created_at", "last_seen_at", "idle_until", "expires_at"}
	for i, c := range cols {
		cols[i] = prefix + c
	}
	return strings.Join(cols, ", ")
}

// sessionsOf collects the sessions of rows.
func sessionsOf(rows pgx.Rows, err error) ([]Session, error) {
	if err != nil {
		return nil, database.Classify(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByName[sessionRow])
	if err != nil {
		return nil, database.Classify(err)
	}
	out := make([]Session, len(got))
	for i, r := range got {
		out[i] = r.session()
	}
	return out, nil
}

// TokenHash is what login_sessions stores of a session's token.
func TokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// InsertSession stores a session with the hash of its token; an empty ID
// gets a new one. Its LastSeenAt is its CreatedAt.
func InsertSession(ctx context.Context, q database.Querier, n Session, token string) (Session, error) {
	rows, err := q.Query(ctx, `insert into login_sessions (id, token_hash, kind, issuer, subject, staff_id, organization_id,
			username, provider_session_id, user_agent, address, created_at, last_seen_at, idle_until, expires_at)
		values (coalesce(nullif($1, '')::uuid, gen_random_uuid()), $2, $3, $4, $5, nullif($6, '')::uuid, $7,
			$8, nullif($9, '')::uuid, $10, $11, $12, $12, $13, $14)
		returning `+sessionColumns(""),
		n.ID, TokenHash(token), n.Kind, n.Issuer, n.Subject, n.StaffID, n.OrganizationID,
		n.Username, n.ProviderSessionID, n.UserAgent, n.Address, n.CreatedAt, n.IdleUntil, n.ExpiresAt)
	got, err := sessionsOf(rows, err)
	if err != nil {
		return Session{}, err
	}
	if len(got) != 1 {
		return Session{}, errors.New("store: the new session was not returned")
	}
	return got[0], nil
}

// SessionByToken returns the session of token, and false when there is none.
func SessionByToken(ctx context.Context, q database.Querier, token string) (Session, bool, error) {
	got, err := sessionsOf(q.Query(ctx, `select `+sessionColumns("")+` from login_sessions where token_hash = $1`, TokenHash(token)))
	if err != nil || len(got) == 0 {
		return Session{}, false, err
	}
	return got[0], true, nil
}

// LiveSession returns an organization's staff session id if it is live at now.
func LiveSession(ctx context.Context, q database.Querier, organizationID, id string, now time.Time) (Session, bool, error) {
	got, err := sessionsOf(q.Query(ctx, `select `+sessionColumns("")+` from login_sessions
		where id = $1::uuid and organization_id = $2 and kind <> 'consent' and idle_until > $3 and expires_at > $3`,
		id, organizationID, now))
	if err != nil || len(got) == 0 {
		return Session{}, false, err
	}
	return got[0], true, nil
}

// TouchSession records a use of session id.
func TouchSession(ctx context.Context, q database.Querier, id string, now, idleUntil time.Time) error {
	_, err := q.Exec(ctx, `update login_sessions set last_seen_at = $2, idle_until = $3
		where id = $1::uuid and last_seen_at < $2`, id, now, idleUntil)
	return database.Classify(err)
}

// deleteSignIns deletes the sessions of the sign-in of each session where
// selects: the session, the provider session a console session was signed
// in through, and every console session signed in through that one.
func deleteSignIns(ctx context.Context, q database.Querier, where string, args ...any) ([]Session, error) {
	return sessionsOf(q.Query(ctx, `with chosen as (
			select id, coalesce(provider_session_id, id) as family from login_sessions where `+where+`
		)
		delete from login_sessions s using chosen c
		where s.id = c.id or s.id = c.family or s.provider_session_id = c.family
		returning `+sessionColumns("s."), args...))
}

// EndSessionByToken deletes the session of token with those of its sign-in.
func EndSessionByToken(ctx context.Context, q database.Querier, token string) ([]Session, error) {
	return deleteSignIns(ctx, q, `token_hash = $1`, TokenHash(token))
}

// EndOneSessionByToken deletes the session of token alone.
func EndOneSessionByToken(ctx context.Context, q database.Querier, token string) ([]Session, error) {
	return sessionsOf(q.Query(ctx, `delete from login_sessions where token_hash = $1 returning `+sessionColumns(""), TokenHash(token)))
}

// EndSession deletes an organization's staff session with those of its sign-in.
func EndSession(ctx context.Context, q database.Querier, organizationID, id string) ([]Session, error) {
	return deleteSignIns(ctx, q, `id = $1::uuid and organization_id = $2 and kind <> 'consent'`, id, organizationID)
}

// EndSessionsOf deletes every staff session of the person of issuer and
// subject in an organization but those of keep's sign-in.
func EndSessionsOf(ctx context.Context, q database.Querier, organizationID, issuer, subject, keep string) ([]Session, error) {
	return sessionsOf(q.Query(ctx, `with kept as (
			select id, coalesce(provider_session_id, id) as family from login_sessions where id = nullif($4, '')::uuid
		)
		delete from login_sessions s
		where s.organization_id = $1 and s.issuer = $2 and s.subject = $3 and s.kind <> 'consent'
			and not exists (select 1 from kept k where s.id = k.id or s.id = k.family or s.provider_session_id = k.family)
		returning `+sessionColumns("s."), organizationID, issuer, subject, keep))
}

// EndStaffSessionsTx deletes every session of a built-in staff account.
func EndStaffSessionsTx(ctx context.Context, tx pgx.Tx, staffID string) ([]Session, error) {
	return sessionsOf(tx.Query(ctx, `delete from login_sessions where staff_id = $1::uuid returning `+sessionColumns(""), staffID))
}

// StaffSessions returns the sessions of a built-in staff account, live or not.
func StaffSessions(ctx context.Context, q database.Querier, staffID string) ([]Session, error) {
	return sessionsOf(q.Query(ctx, `select `+sessionColumns("")+` from login_sessions where staff_id = $1::uuid
		order by created_at desc, id`, staffID))
}

// ListSessions returns an organization's staff sessions live at now, of
// the person of issuer and subject when issuer is not empty, by person,
// newest first; at most limit.
func ListSessions(ctx context.Context, q database.Querier, organizationID, issuer, subject string, now time.Time, limit int) ([]Session, error) {
	return sessionsOf(q.Query(ctx, `select `+sessionColumns("")+` from login_sessions
		where organization_id = $1 and kind <> 'consent' and idle_until > $2 and expires_at > $2
			and ($3 = '' or (issuer = $3 and subject = $4))
		order by lower(username), issuer, subject, created_at desc, id
		limit $5`, organizationID, now, issuer, subject, limit))
}

// DeleteExpiredSessions deletes up to a thousand sessions that timed out
// before now, and says how many.
func DeleteExpiredSessions(ctx context.Context, q database.Querier, now time.Time) (int64, error) {
	tag, err := q.Exec(ctx, `delete from login_sessions where id in (
		select id from login_sessions where idle_until <= $1
		union
		select id from login_sessions where expires_at <= $1
		limit 1000)`, now)
	return tag.RowsAffected(), database.Classify(err)
}
