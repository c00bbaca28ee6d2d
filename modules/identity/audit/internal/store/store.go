// Package store is the SQL of the audit log: the audit_log table.
package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what both *pgxpool.Pool and pgx.Tx offer.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// AuditEntry is a row of audit_log.
type AuditEntry struct {
	ID             int64
	OrganizationID string
	Actor          string
	Action         string
	Target         string
	Detail         string
	At             time.Time
}

// InsertAudit appends an entry to the audit log.
func InsertAudit(ctx context.Context, q Querier, e AuditEntry) error {
	_, err := q.Exec(ctx, `insert into audit_log (organization_id, actor, action, target, detail) values ($1, $2, $3, $4, $5)`,
		e.OrganizationID, e.Actor, e.Action, e.Target, e.Detail)
	return err
}

// AuditLog returns up to limit+1 entries of an organization, newest first,
// older than the entry before when it is not zero.
func AuditLog(ctx context.Context, q Querier, organizationID string, limit int, before int64) ([]AuditEntry, error) {
	rows, err := q.Query(ctx, `select id, organization_id, actor, action, target, detail, at from audit_log
		where organization_id = $1 and ($2 = 0 or id < $2) order by id desc limit $3`, organizationID, before, limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := r.Scan(&e.ID, &e.OrganizationID, &e.Actor, &e.Action, &e.Target, &e.Detail, &e.At)
		return e, err
	})
}
