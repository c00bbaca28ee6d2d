package audit

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/audit/internal/store"
)

// Store is the audit log in PostgreSQL (Log).
type Store struct{ pool *pgxpool.Pool }

var _ Log = (*Store)(nil)

// New returns the audit log on pool.
func New(pool *pgxpool.Pool) (*Store, error) {
	if pool == nil {
		return nil, errors.New("audit: New needs a pool")
	}
	return &Store{pool: pool}, nil
}

// RecordAudit implements Log.
func (s *Store) RecordAudit(ctx context.Context, e identity.AuditEntry) error {
	return record(ctx, s.pool, e)
}

// RecordAuditTx implements Log.
func (s *Store) RecordAuditTx(ctx context.Context, tx database.Tx, e identity.AuditEntry) error {
	return record(ctx, tx, e)
}

// QueueAudit implements Log.
func (s *Store) QueueAudit(b *database.Batch, entries []identity.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	rows := make([]store.AuditEntry, len(entries))
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return err
		}
		rows[i] = store.AuditEntry{OrganizationID: e.OrganizationID, Actor: e.Actor, Action: e.Action, Target: e.Target, Detail: e.Detail}
	}
	b.QueueExec(store.InsertAuditsSQL(len(rows)), store.InsertAuditsArgs(rows))
	return nil
}

// QueueAuditOnce implements Log: one statement per entry, each for one
// organization's log, in b's round trip.
func (s *Store) QueueAuditOnce(b *database.Batch, entries []identity.AuditEntry, within time.Duration) error {
	rows := make([]store.AuditEntry, len(entries))
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return err
		}
		rows[i] = store.AuditEntry{OrganizationID: e.OrganizationID, Actor: e.Actor, Action: e.Action, Target: e.Target, Detail: e.Detail}
	}
	for _, r := range rows {
		b.QueueExec(store.InsertAuditOnceSQL, store.InsertAuditOnceArgs(r, within))
	}
	return nil
}

// record validates e and inserts it through q, the pool or a transaction.
func record(ctx context.Context, q database.Querier, e identity.AuditEntry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	err := store.InsertAudit(ctx, q, store.AuditEntry{OrganizationID: e.OrganizationID, Actor: e.Actor,
		Action: e.Action, Target: e.Target, Detail: e.Detail})
	return database.Classify(err)
}

// AuditLog implements Log.
func (s *Store) AuditLog(ctx context.Context, organizationID string, limit int, before int64) ([]identity.AuditEntry, bool, error) {
	if limit < 1 || limit > 100 {
		limit = 50
	}
	rows, err := store.AuditLog(ctx, s.pool, organizationID, limit, before)
	if err != nil {
		return nil, false, database.Classify(err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]identity.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = identity.AuditEntry{ID: r.ID, OrganizationID: r.OrganizationID, Actor: r.Actor, Action: r.Action,
			Target: r.Target, Detail: r.Detail, At: r.At}
	}
	return out, more, nil
}
