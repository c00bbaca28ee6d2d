package httpkit

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/webhooks"
)

// AuditLog records entries in the transaction of the change they tell of.
type AuditLog interface {
	RecordAuditTx(ctx context.Context, tx database.Tx, e identity.AuditEntry) error
}

// AuditFailed makes a failure to record an action an internal error, which
// is logged with the request id and shown as a generic message, unless the
// database is unavailable (503). An Invalid entry is a fault of ours, not of
// the caller's input: it must not come back as a form error.
func AuditFailed(err error) error {
	if err == nil || apperr.CodeOf(err) == apperr.Unavailable {
		return err
	}
	return apperr.Wrap(err, apperr.Internal, "The action could not be recorded in the audit log, so it was not done.")
}

// EndpointAudit describes an endpoint for the audit log: its origin (never
// its path or query, which may hold a token of the receiver's), the types it
// takes and whether it is enabled, within the log's 500 characters.
func EndpointAudit(e webhooks.Endpoint) string {
	origin := e.URL
	if u, err := url.Parse(e.URL); err == nil {
		origin = u.Scheme + "://" + u.Host
	}
	types := "all events"
	if len(e.EventTypes) > 0 {
		s := make([]string, len(e.EventTypes))
		for i, t := range e.EventTypes {
			s[i] = string(t)
		}
		types = strings.Join(s, " ")
	}
	state := "enabled"
	if !e.Enabled {
		state = "disabled"
	}
	return TruncateRunes(origin, 300) + "; " + types + "; " + state
}

// RecoveryAudit describes a recovery for the audit log.
func RecoveryAudit(r webhooks.Recovery) string {
	of := "failed deliveries"
	if r.EndpointID == "" {
		of += " to the flows' webhook URLs"
		if r.Host != "" {
			of += " on " + r.Host
		}
	}
	return fmt.Sprintf("recovery %s of %d %s since %s", r.ID, r.Total, of, r.Since.UTC().Format(time.RFC3339))
}

// RedeliveryAudit describes a redelivery for the audit log.
func RedeliveryAudit(r webhooks.Redelivery) string {
	to := "every destination"
	if r.EndpointID != "" {
		to = "endpoint " + r.EndpointID
	}
	noun := "deliveries"
	if r.Deliveries == 1 {
		noun = "delivery"
	}
	return fmt.Sprintf("%s of flow %s to %s (%d %s)", r.Type, TruncateRunes(r.FlowID, 100), to, r.Deliveries, noun)
}

// TruncateRunes cuts s to n characters, the last an ellipsis, when it is
// longer.
func TruncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
