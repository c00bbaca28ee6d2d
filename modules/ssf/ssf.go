// Package ssf makes flowd an OpenID Shared Signals Framework 1.0
// transmitter: a data holder's receivers manage streams, and every stream
// carries a Security Event Token (RFC 8417) when a consent that opens one of
// the data holder's resources ends — withdrawn, expired, cancelled or
// erased — delivered by push (RFC 8935) or poll (RFC 8936) until the
// receiver acknowledges it. docs/ssf.md says what a data holder does.
package ssf

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/fieldcheck"
)

// What the transmitter speaks.
const (
	SpecVersion = "1_0"
	// DeliveryPush and DeliveryPoll are the delivery methods (SSF 1.0 §8.1.1).
	DeliveryPush = "urn:ietf:rfc:8935"
	DeliveryPoll = "urn:ietf:rfc:8936"
	// SETType is the JOSE typ of every SET (RFC 8417 §2.3).
	SETType = "secevent+jwt"
	// EventConsentRevoked: a consent that opens the data holder's resource
	// no longer holds.
	EventConsentRevoked = "urn:flowd:event:consent-revoked"
	// EventVerification and EventStreamUpdated are SSF's own (§8.1.4, §8.1.5);
	// every stream carries them, whatever it asked for.
	EventVerification  = "https://schemas.openid.net/secevent/ssf/event-type/verification"
	EventStreamUpdated = "https://schemas.openid.net/secevent/ssf/event-type/stream-updated"
)

// EventsSupported are the event types a stream may ask for.
var EventsSupported = []string{EventConsentRevoked}

// Status is a stream's status (SSF 1.0 §8.1.2).
type Status string

const (
	// Enabled: the transmitter sends the stream's events.
	Enabled Status = "enabled"
	// Paused: the transmitter holds them, to send once enabled again.
	Paused Status = "paused"
	// Disabled: the transmitter neither sends nor holds them.
	Disabled Status = "disabled"
)

// Valid reports whether s is one of the three statuses.
func (s Status) Valid() bool { return s == Enabled || s == Paused || s == Disabled }

// Why a consent no longer holds, and who ended it.
const (
	ReasonWithdrawn = "withdrawn"
	ReasonExpired   = "expired"
	ReasonErased    = "erased"
	ReasonCancelled = "cancelled"

	InitiatorIndividual   = "individual"
	InitiatorOrganization = "organization"
	InitiatorSystem       = "system"
)

// Delivery is how a stream's SETs reach its receiver.
type Delivery struct {
	Method string // DeliveryPush or DeliveryPoll
	// EndpointURL is the receiver's for push and flowd's (POST /ssf/poll/{id})
	// for poll.
	EndpointURL string
	// AuthorizationHeader is sent with each push; it is a secret the
	// receiver gave and is never shown back.
	AuthorizationHeader string
}

// Stream is a data holder's event stream.
type Stream struct {
	ID             string
	OrganizationID string   // the data holder's
	Audience       []string // the SETs' aud: the client that created the stream
	Description    string
	Delivery       Delivery
	// EventsRequested are the receiver's; EventsDelivered those of them
	// that are in EventsSupported.
	EventsRequested []string
	EventsDelivered []string
	Status          Status
	StatusReason    string
	// Failures counts the push attempts failed since the last success;
	// LastError says what the last one met.
	Failures  int
	LastError string
	CreatedBy string // "client:<id>"
	CreatedAt time.Time
	UpdatedAt time.Time
}

// StreamConfig is what a receiver sets of a stream. In an update, a nil
// field keeps what the stream has.
type StreamConfig struct {
	Description     *string
	Delivery        *Delivery
	EventsRequested *[]string
}

// Limits of a stream's configuration.
const (
	MaxDescription   = 500
	MaxEvents        = 20
	MaxAuthorization = 4096
	MaxState         = 500
	MaxReason        = 500
	// MaxPollEvents bounds the SETs one poll returns.
	MaxPollEvents = 1000
)

// ValidateConfig checks a receiver's configuration (all of it when full,
// as a create or PUT gives it) and returns an apperr Invalid error naming
// each offending field by its SSF name. allowInsecure lets a push endpoint
// be http.
func ValidateConfig(c StreamConfig, full, allowInsecure bool) error {
	var f apperr.Fields
	if c.Description != nil {
		if msg := fieldcheck.Text(*c.Description, MaxDescription); msg != "" {
			f.Add("description", "%s", msg)
		}
	}
	if c.Delivery == nil && full {
		f.Add("delivery", "is required")
	}
	if d := c.Delivery; d != nil {
		switch d.Method {
		case DeliveryPush:
			checkPushURL(&f, d.EndpointURL, allowInsecure)
		case DeliveryPoll:
			if d.EndpointURL != "" {
				f.Add("delivery.endpoint_url", "is flowd's for poll delivery: leave it out")
			}
		case "":
			f.Add("delivery.method", "is required")
		default:
			f.Add("delivery.method", "must be %s (push) or %s (poll)", DeliveryPush, DeliveryPoll)
		}
		if len(d.AuthorizationHeader) > MaxAuthorization || strings.ContainsFunc(d.AuthorizationHeader, fieldcheck.IsControlOrFormat) {
			f.Add("delivery.authorization_header", "must be at most %d characters without control characters", MaxAuthorization)
		}
	}
	if c.EventsRequested != nil {
		if len(*c.EventsRequested) > MaxEvents {
			f.Add("events_requested", "must name at most %d event types", MaxEvents)
		}
		for _, e := range *c.EventsRequested {
			if u, err := url.Parse(e); err != nil || !u.IsAbs() || len(e) > fieldcheck.MaxURL {
				f.Add("events_requested", "must be event type URIs, such as %s", EventConsentRevoked)
				break
			}
		}
	}
	return f.Err()
}

func checkPushURL(f *apperr.Fields, raw string, allowInsecure bool) {
	if raw == "" {
		f.Add("delivery.endpoint_url", "is required for push delivery")
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || len(raw) > fieldcheck.MaxURL:
		f.Add("delivery.endpoint_url", "must be an absolute https URL")
	case u.Scheme == "http" && !allowInsecure:
		f.Add("delivery.endpoint_url", "must be https")
	case u.User != nil || u.Fragment != "":
		f.Add("delivery.endpoint_url", "must have no user information and no fragment")
	}
}

// Delivered returns the event types of requested that flowd supports, in
// EventsSupported order.
func Delivered(requested []string) []string {
	out := []string{}
	for _, e := range EventsSupported {
		if slices.Contains(requested, e) {
			out = append(out, e)
		}
	}
	return out
}

// ErrStreamNotFound: no such stream, or another organization's.
var ErrStreamNotFound = errors.New("ssf: stream not found")

// Owner is who manages a stream: the data holder's organization and the
// client that calls.
type Owner struct {
	OrganizationID string
	ClientID       string
}

// PollRequest is an RFC 8936 poll.
type PollRequest struct {
	MaxEvents         int  // 0: acknowledge only
	ReturnImmediately bool // false: wait up to the long-poll bound for a SET
	Ack               []string
	SetErrs           map[string]SetErr
}

// SetErr is a receiver's complaint about one SET (RFC 8935 §2.3).
type SetErr struct {
	Err         string
	Description string
}

// PollResult is the answer to a poll: the SETs by jti.
type PollResult struct {
	SETs          map[string]string
	MoreAvailable bool
}

// Streams are the data holders' streams, as their receivers manage them
// (SSF 1.0 §8.1). Every method takes the caller's organization, and a
// stream of another organization is ErrStreamNotFound.
type Streams interface {
	// CreateStream makes a stream with c (apperr Invalid, nothing made).
	// The changes run before in their transaction (the caller's audit).
	CreateStream(ctx context.Context, o Owner, c StreamConfig, before ...database.BeforeCommit[Stream]) (Stream, error)
	// Stream returns one stream. ErrStreamNotFound.
	Stream(ctx context.Context, organizationID, id string) (Stream, error)
	// ListStreams returns the organization's streams, oldest first.
	ListStreams(ctx context.Context, organizationID string) ([]Stream, error)
	// UpdateStream sets the fields c gives (all of them when replace: a
	// PUT). ErrStreamNotFound; apperr Invalid.
	UpdateStream(ctx context.Context, organizationID, id string, c StreamConfig, replace bool, before ...database.BeforeCommit[Stream]) (Stream, error)
	// DeleteStream deletes a stream with the SETs it holds. ErrStreamNotFound.
	DeleteStream(ctx context.Context, organizationID, id string, before ...database.BeforeCommit[Stream]) error
	// SetStatus sets a stream's status with its reason; enabling a paused
	// stream sends what it held, disabling one drops it. ErrStreamNotFound;
	// apperr Invalid.
	SetStatus(ctx context.Context, organizationID, id string, s Status, reason string, before ...database.BeforeCommit[Stream]) (Stream, error)
	// Verify puts a verification event carrying state on the stream.
	// ErrStreamNotFound; apperr Invalid.
	Verify(ctx context.Context, organizationID, id, state string) error
	// AddSubject puts a consent (by its flow id) back on the stream after
	// RemoveSubject took it off: every consent is on it by default.
	// ErrStreamNotFound; apperr Invalid.
	AddSubject(ctx context.Context, organizationID, id, consentID string) error
	RemoveSubject(ctx context.Context, organizationID, id, consentID string) error
	// Poll acknowledges req.Ack, records req.SetErrs and returns up to
	// req.MaxEvents of the stream's unacknowledged SETs, oldest first,
	// waiting for one up to the long-poll bound unless
	// req.ReturnImmediately. ErrStreamNotFound; apperr Invalid (a push
	// stream, a bad request).
	Poll(ctx context.Context, organizationID, id string, req PollRequest) (PollResult, error)
}

// Revocation is a consent that no longer holds, as the change that ended it
// reports it in its transaction.
type Revocation struct {
	OrganizationID    string // the consent's (the flow's) organization
	ConsentID         string // the flow id
	DefinitionID      string
	DefinitionVersion int
	Reason            string // Reason…
	Initiator         string // Initiator…
	At                time.Time
	// Txn ties together the SETs one change makes (RFC 8417 §2.2).
	Txn string
}

// Transmitter puts revocations on the streams concerned.
type Transmitter interface {
	// RevokedTx puts a consent-revoked SET on every stream, enabled or
	// paused, of each data holder whose resource the consent's definition
	// version names, in tx: they commit with the change or not at all.
	RevokedTx(ctx context.Context, tx database.Tx, r Revocation) error
}

// DataHolders says which organizations' resources a definition version
// names (the consent module's).
type DataHolders interface {
	DataHoldersTx(ctx context.Context, tx database.Tx, organizationID, definitionID string, version int) ([]string, error)
}

// Signer signs a SET's claims with flowd's receipt key, under JOSE typ
// SETType; the key is published at the issuer's jwks_uri.
type Signer interface {
	SignReceiptTx(ctx context.Context, tx database.Tx, typ string, claims []byte) (string, error)
}
