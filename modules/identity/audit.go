package identity

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/apperr"
)

// AuditEntry records one thing a staff member or an API client did: who, what,
// to which target, when. It never holds a secret, a token or a full national
// id: Target names a flow, client or setting, Detail says what changed. The
// audit part keeps the log; every part and module records in it.
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
	AuditWebhookEndpointTest    = "webhook_endpoint.test"
	AuditSigningKeyRotate       = "webhook_signing_key.rotate"
	AuditEventRedeliver         = "event.redeliver"
	// AuditSubjectErase is a person's erasure; AuditSubjectEraseReapplied
	// its repetition after a restore from a backup taken before it.
	AuditSubjectErase          = "subject.erase"
	AuditSubjectEraseReapplied = "subject.erase_reapplied"
	// A client revoked one of its tokens at /oauth/revoke.
	AuditRefreshTokenRevoke = "refresh_token.revoke"
	AuditAccessTokenRevoke  = "access_token.revoke"

	// A client given its own API rate limit, or the default again.
	AuditClientRateLimit = "client.rate_limit"
)

// AuditFlowUseRefused: a use of a consent that was not in force
// (withdrawn, expired, rejected or not yet answered) was refused.
const AuditFlowUseRefused = "flow.use_refused"

// Audit actions of data holders' resources and consent tokens.
const (
	AuditResourceCreate = "resource.create"
	// The Shared Signals streams a data holder's receivers manage; a
	// status change by flowd itself (a failing stream paused) has the
	// actor "system".
	AuditStreamCreate = "ssf_stream.create"
	AuditStreamUpdate = "ssf_stream.update"
	AuditStreamDelete = "ssf_stream.delete"
	AuditStreamStatus = "ssf_stream.status"
	// AuditConsentTokenRefused: a consent token was asked for and refused
	// (invalid_authorization_details); the detail says why.
	AuditConsentTokenRefused = "consent_token.refused"
)

// Audit actions of staff accounts.
const (
	AuditStaffDisable       = "staff.disable"
	AuditStaffPasswordReset = "staff.reset_password"
	AuditStaffRoleChange    = "staff.set_role"
	AuditStaffDelete        = "staff.delete"
)

// Audit actions of sessions.
const (
	// AuditSessionSignOut: the person signed out.
	AuditSessionSignOut = "session.sign_out"
	// AuditSessionEnd: a session was ended by someone or something else;
	// the entry's detail says by whom or why.
	AuditSessionEnd = "session.end"
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
