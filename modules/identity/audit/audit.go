// Package audit is identity's part that keeps the audit log: what staff,
// API clients and operators did to each organization, in the words of
// identity.AuditEntry. Entries are only ever added.
package audit

import (
	"context"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
)

// Log keeps the audit log of staff actions.
type Log interface {
	// RecordAudit appends e to its organization's audit log, committed on
	// its own. apperr Invalid.
	RecordAudit(ctx context.Context, e identity.AuditEntry) error
	// RecordAuditTx appends e in tx, so that the entry commits with the
	// change it records, or not at all (a staff action in another module's
	// transaction, through database.BeforeCommit). apperr Invalid.
	RecordAuditTx(ctx context.Context, tx database.Tx, e identity.AuditEntry) error
	// QueueAudit adds to b the one statement that appends entries, of one
	// organization or several, so that they commit with what else b
	// writes, in its round trip. Nothing is queued when one is invalid, or
	// when there are none. apperr Invalid.
	QueueAudit(b *database.Batch, entries []identity.AuditEntry) error
	// QueueAuditOnce is QueueAudit for entries that repeat: each is
	// appended unless the same entry (organization, actor, action, target
	// and detail) was appended within the last within, so that a repetition
	// coalesces into the first entry of its window. apperr Invalid.
	QueueAuditOnce(b *database.Batch, entries []identity.AuditEntry, within time.Duration) error
	// AuditLog returns a page of an organization's audit log, newest first:
	// entries older than before (an entry id; 0 for the newest), and whether
	// more follow. A limit outside 1 to 100 is 50.
	AuditLog(ctx context.Context, organizationID string, limit int, before int64) ([]identity.AuditEntry, bool, error)
}
