// Package store is the SQL of the audit log: the audit_log table.
package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

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
func InsertAudit(ctx context.Context, q database.Querier, e AuditEntry) error {
	_, err := q.Exec(ctx, `insert into audit_log (organization_id, actor, action, target, detail) values ($1, $2, $3, $4, $5)`,
		e.OrganizationID, e.Actor, e.Action, e.Target, e.Detail)
	return err
}

// insertAuditsSQL are InsertAuditsSQL's statements of a few entries, made
// once.
var insertAuditsSQL = func() []string {
	out := make([]string, 9)
	for n := range out {
		out[n] = insertAudits(n)
	}
	return out
}()

// InsertAuditsSQL is the one statement that appends n entries, whose
// columns follow each other in its arguments (InsertAuditsArgs).
func InsertAuditsSQL(n int) string {
	if n < len(insertAuditsSQL) {
		return insertAuditsSQL[n]
	}
	return insertAudits(n)
}

func insertAudits(n int) string {
	var b strings.Builder
	b.WriteString(`insert into audit_log (organization_id, actor, action, target, detail) values `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		p := 5 * i
		fmt.Fprintf(&b, "($%d, $%d, $%d, $%d, $%d)", p+1, p+2, p+3, p+4, p+5)
	}
	return b.String()
}

// InsertAuditsArgs are the arguments of InsertAuditsSQL(len(entries)).
func InsertAuditsArgs(entries []AuditEntry) []any {
	args := make([]any, 0, 5*len(entries))
	for _, e := range entries {
		args = append(args, e.OrganizationID, e.Actor, e.Action, e.Target, e.Detail)
	}
	return args
}

// InsertAuditOnceSQL appends one entry ($1 to $5) unless the same entry
// was appended within the last $6 microseconds.
const InsertAuditOnceSQL = `insert into audit_log (organization_id, actor, action, target, detail)
	select $1, $2, $3, $4, $5 where not exists (select 1 from audit_log
		where organization_id = $1 and action = $3 and target = $4 and actor = $2 and detail = $5
			and at > now() - $6 * interval '1 microsecond')`

// InsertAuditOnceArgs are the arguments of InsertAuditOnceSQL.
func InsertAuditOnceArgs(e AuditEntry, within time.Duration) []any {
	return []any{e.OrganizationID, e.Actor, e.Action, e.Target, e.Detail, within.Microseconds()}
}

// AuditLog returns up to limit+1 entries of an organization, newest first,
// older than the entry before when it is not zero.
func AuditLog(ctx context.Context, q database.Querier, organizationID string, limit int, before int64) ([]AuditEntry, error) {
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
