package identity

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/internal/store"
)

// AuditEntry records one thing a staff member or an API client did: who, what,
// to which target, when. It never holds a secret, a token or a full national
// id: Target names a flow, client or setting, Detail says what changed.
type AuditEntry struct {
	ID             int64
	OrganizationID string
	Actor          string // "staff:<username>", "client:<id>", "operator:cli"
	Action         string // e.g. "flow.delete", "client.create"
	Target         string // e.g. a reference id or client id
	Detail         string
	At             time.Time
}

// Audit actions the console and the API record.
const (
	AuditFlowRevealNationalID   = "flow.reveal_national_id"
	AuditFlowCancel             = "flow.cancel"
	AuditFlowDelete             = "flow.delete"
	AuditTaskRetry              = "task.retry"
	AuditClientCreate           = "client.create"
	AuditClientRotate           = "client.rotate_secret"
	AuditClientRevoke           = "client.revoke"
	AuditClientKeys             = "client.replace_keys"
	AuditClientDPoP             = "client.dpop" // DPoP required or no longer required
	AuditWebhookSecretReveal    = "webhook_secret.reveal"
	AuditWebhookSecretRotate    = "webhook_secret.rotate"
	AuditSettingsUpdate         = "settings.update"
	AuditDefinitionCreate       = "definition.create"
	AuditDefinitionPublish      = "definition.publish"
	AuditDefinitionRetire       = "definition.retire"
	AuditFlowWithdraw           = "flow.withdraw"
	AuditWebhookEndpointCreate  = "webhook_endpoint.create"
	AuditWebhookEndpointUpdate  = "webhook_endpoint.update"
	AuditWebhookEndpointDelete  = "webhook_endpoint.delete"
	AuditWebhookEndpointRecover = "webhook_endpoint.recover"
	AuditWebhookRecover         = "webhook.recover" // of the flows' own webhook URLs
	AuditEventRedeliver         = "event.redeliver"
	// A client revoked one of its tokens at /oauth/revoke.
	AuditRefreshTokenRevoke = "refresh_token.revoke"
	AuditAccessTokenRevoke  = "access_token.revoke"

	// A client given its own API rate limit, or the default again.
	AuditClientRateLimit = "client.rate_limit"
)

// Validate checks an entry before it is stored; an Invalid error names the field.
func (e AuditEntry) Validate() error {
	var f apperr.Fields
	if e.OrganizationID == "" {
		f.Add("organizationId", "is required")
	}
	if e.Actor == "" || utf8.RuneCountInString(e.Actor) > 320 {
		f.Add("actor", "is required, at most 320 characters")
	}
	if e.Action == "" || len(e.Action) > 64 || strings.Trim(e.Action, "abcdefghijklmnopqrstuvwxyz_.") != "" {
		f.Add("action", "must be lower-case letters, _ and .")
	}
	if utf8.RuneCountInString(e.Target) > 200 {
		f.Add("target", "must be at most 200 characters")
	}
	if utf8.RuneCountInString(e.Detail) > 500 {
		f.Add("detail", "must be at most 500 characters")
	}
	return f.Err()
}

// Audit keeps the audit log of staff actions.
type Audit interface {
	// RecordAudit appends e to its organization's audit log, committed on
	// its own. apperr Invalid.
	RecordAudit(ctx context.Context, e AuditEntry) error
	// RecordAuditTx appends e in tx, so that the entry commits with the
	// change it records, or not at all (a staff action in another module's
	// transaction, through database.BeforeCommit). apperr Invalid.
	RecordAuditTx(ctx context.Context, tx database.Tx, e AuditEntry) error
	// AuditLog returns a page of an organization's audit log, newest first:
	// entries older than before (an entry id; 0 for the newest), and whether
	// more follow.
	AuditLog(ctx context.Context, organizationID string, limit int, before int64) ([]AuditEntry, bool, error)
}

// RecordAudit implements Audit.
func (m *Module) RecordAudit(ctx context.Context, e AuditEntry) error {
	return m.recordAudit(ctx, m.pool, e)
}

// RecordAuditTx implements Audit.
func (m *Module) RecordAuditTx(ctx context.Context, tx database.Tx, e AuditEntry) error {
	return m.recordAudit(ctx, tx, e)
}

// recordAudit validates e and inserts it through q, the pool or a transaction.
func (m *Module) recordAudit(ctx context.Context, q store.Querier, e AuditEntry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	err := store.InsertAudit(ctx, q, store.AuditEntry{OrganizationID: e.OrganizationID, Actor: e.Actor,
		Action: e.Action, Target: e.Target, Detail: e.Detail})
	return database.Classify(err)
}

// AuditLog implements Audit.
func (m *Module) AuditLog(ctx context.Context, organizationID string, limit int, before int64) ([]AuditEntry, bool, error) {
	if limit < 1 || limit > 100 {
		limit = 50
	}
	rows, err := store.AuditLog(ctx, m.pool, organizationID, limit, before)
	if err != nil {
		return nil, false, database.Classify(err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = AuditEntry{ID: r.ID, OrganizationID: r.OrganizationID, Actor: r.Actor, Action: r.Action,
			Target: r.Target, Detail: r.Detail, At: r.At}
	}
	return out, more, nil
}
