package webhooks

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/fieldcheck"
	"github.com/flowd/flowd/internal/netguard"
	"github.com/flowd/flowd/modules/webhooks/internal/signing"
)

// An endpoint is a URL an organization registers to receive its flows'
// events: besides a flow's own webhookUrl, every enabled endpoint
// subscribed to an event's type gets a delivery of its own. This file holds
// the endpoint registry's domain; endpoints_postgres.go keeps it.

// Endpoint is one of an organization's webhook endpoints.
type Endpoint struct {
	ID             string // a UUID v7
	OrganizationID string
	URL            string
	Description    string
	// EventTypes are the types the endpoint receives, in EventTypes order;
	// empty means every type, also those added later.
	EventTypes []EventType
	Enabled    bool
	// DisabledReason says why flowd disabled the endpoint (its deliveries
	// kept failing); empty when it is enabled or a person disabled it.
	DisabledReason string
	// FailingSince is the first failed delivery since the last success; nil
	// while the endpoint is healthy.
	FailingSince *time.Time
	// DisabledAt is when the endpoint was disabled, by a person or by
	// flowd: what it missed since then a recovery sends once it is enabled
	// again. Nil while it is enabled.
	DisabledAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Version grows with every change of the endpoint: by a person, by
	// flowd disabling it, and by its health (FailingSince) changing.
	Version int
	// Signing is the signature its deliveries carry, Payload their body.
	Signing Signing
	Payload Payload
	// SigningChangedAt is when Signing last changed; nil when it never did.
	// For SigningOverlap after, deliveries carry both signatures, so that
	// its receiver can move from one to the other without a gap.
	SigningChangedAt *time.Time
	// Ordering is the order the endpoint receives a flow's events in.
	Ordering Ordering
	// RateLimit is the most deliveries a second the endpoint receives; 0
	// means no limit.
	RateLimit int
}

// Signing is the Standard Webhooks signature an endpoint's deliveries carry.
type Signing string

const (
	// SigningSymmetric is v1: HMAC-SHA256 under the organization's whsec_ secret.
	SigningSymmetric Signing = "symmetric"
	// SigningAsymmetric is v1a: ed25519 under the organization's key pair,
	// verified with its published public key, so that a receiver holds no
	// secret that could forge an event.
	SigningAsymmetric Signing = "asymmetric"
)

// Payload is the body an endpoint's deliveries carry.
type Payload string

const (
	// PayloadFull is the event's whole data.
	PayloadFull Payload = "full"
	// PayloadThin is the event's type, ids, sequence and links to fetch
	// the current state: nothing about the flow's person.
	PayloadThin Payload = "thin"
)

// SigningOverlap is how long after an endpoint's signing changes, or the
// organization's secret or key pair is rotated, the old signature is sent
// beside the new one.
const SigningOverlap = signing.Overlap

// ETag is the endpoint's entity tag, which names its version.
func (e Endpoint) ETag() string { return etag.Version(e.Version) }

// Subscribes reports whether the endpoint wants events of type t, enabled or not.
func (e Endpoint) Subscribes(t EventType) bool {
	return len(e.EventTypes) == 0 || slices.Contains(e.EventTypes, t)
}

// NewEndpoint is what registers an endpoint.
type NewEndpoint struct {
	URL         string
	Description string
	EventTypes  []EventType // empty: every type
	Enabled     bool
	Signing     Signing  // empty: symmetric
	Payload     Payload  // empty: full
	Ordering    Ordering // empty: Unordered
	RateLimit   int      // 0: no limit
}

// EndpointUpdate changes an endpoint: each field that is not nil replaces
// the endpoint's (PATCH). An empty, non-nil EventTypes subscribes to every type.
type EndpointUpdate struct {
	URL         *string
	Description *string
	EventTypes  *[]EventType
	Enabled     *bool
	Signing     *Signing
	Payload     *Payload
	Ordering    *Ordering
	RateLimit   *int // 0 removes the limit
}

// EndpointChange is an endpoint before and after an update.
type EndpointChange struct {
	Before, After Endpoint
}

// Describe says what an update changed, for the audit log: the names of
// the changed fields, as the API calls them, with the new enabled state.
func (c EndpointChange) Describe() string {
	var parts []string
	if c.Before.URL != c.After.URL {
		parts = append(parts, "url")
	}
	if c.Before.Description != c.After.Description {
		parts = append(parts, "description")
	}
	if !slices.Equal(c.Before.EventTypes, c.After.EventTypes) {
		parts = append(parts, "eventTypes")
	}
	if c.Before.Signing != c.After.Signing {
		parts = append(parts, "signing")
	}
	if c.Before.Payload != c.After.Payload {
		parts = append(parts, "payload")
	}
	if c.Before.Ordering != c.After.Ordering {
		parts = append(parts, "ordering")
	}
	if c.Before.RateLimit != c.After.RateLimit {
		parts = append(parts, "rateLimit")
	}
	if c.Before.Enabled != c.After.Enabled {
		if c.After.Enabled {
			parts = append(parts, "enabled")
		} else {
			parts = append(parts, "disabled")
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

// EndpointRules are the deployment's settings an endpoint's URL is held to.
type EndpointRules struct {
	// AllowInsecureURLs allows http for any host (FLOWD_ALLOW_INSECURE_URLS),
	// as it does for a flow's webhookUrl; otherwise only https.
	AllowInsecureURLs bool
	// AllowPrivate allows a URL whose host is a loopback, private,
	// link-local, multicast or other non-public address
	// (FLOWD_WEBHOOK_ALLOW_PRIVATE), as it does for deliveries.
	AllowPrivate bool
}

// Limits of an endpoint.
const (
	// MaxEndpoints is how many endpoints an organization may have.
	MaxEndpoints = 100
	// MaxEndpointDescription is the longest description, in characters.
	MaxEndpointDescription = 200
)

// ErrEndpointNotFound: no such endpoint in the organization (another
// organization's endpoints do not exist for it), or a malformed id.
var ErrEndpointNotFound = errors.New("webhooks: endpoint not found")

// EndpointOrder is the order List returns endpoints in.
type EndpointOrder int

const (
	OldestFirst EndpointOrder = iota
	NewestFirst
)

// Endpoints keeps organizations' webhook endpoints. Every method is scoped
// to one organization. Writes take before hooks that run in the write's
// transaction (database.BeforeCommit): the console and the API record the
// change in the audit log there.
type Endpoints interface {
	// Create registers an endpoint. Bad input is one apperr Invalid error
	// naming every field by its API name (url, description, eventTypes[i]);
	// an organization that has MaxEndpoints already is apperr Conflict.
	Create(ctx context.Context, organizationID string, n NewEndpoint, before ...database.BeforeCommit[Endpoint]) (Endpoint, error)
	// Get returns one endpoint. ErrEndpointNotFound.
	Get(ctx context.Context, organizationID, id string) (Endpoint, error)
	// List returns the organization's endpoints, at most MaxEndpoints, by
	// creation in the order asked for.
	List(ctx context.Context, organizationID string, order EndpointOrder) ([]Endpoint, error)
	// Update changes an endpoint. cond is checked against the endpoint's
	// ETag under the update's lock: when it does not hold, the update is an
	// apperr PreconditionFailed error and changes nothing (Delete takes it
	// alike). ErrEndpointNotFound; apperr Invalid as Create. Enabling an
	// endpoint clears its DisabledReason, FailingSince and DisabledAt;
	// disabling it sets DisabledAt.
	Update(ctx context.Context, organizationID, id string, u EndpointUpdate, cond etag.IfMatch, before ...database.BeforeCommit[EndpointChange]) (Endpoint, error)
	// Delete removes an endpoint for good and returns it.
	// ErrEndpointNotFound, apperr PreconditionFailed.
	Delete(ctx context.Context, organizationID, id string, cond etag.IfMatch, before ...database.BeforeCommit[Endpoint]) (Endpoint, error)
	// Disabled returns the organization's endpoints flowd disabled because
	// their deliveries kept failing (DisabledReason set), oldest first: what
	// the console's banner names.
	Disabled(ctx context.Context, organizationID string) ([]Endpoint, error)
	// MatchingTx returns, in tx, the organization's enabled endpoints that
	// subscribe to t, oldest first: what an event of type t fans out to, read
	// in the transaction that publishes it.
	MatchingTx(ctx context.Context, tx database.Tx, organizationID string, t EventType) ([]Endpoint, error)
}

// Normalize trims the surrounding white space of the URL and description
// and keeps each event type once, in EventTypes order; unknown ones stay
// where they were, after the known, for Validate to name.
func (n NewEndpoint) Normalize() NewEndpoint {
	n.URL = strings.TrimSpace(n.URL)
	n.Description = strings.TrimSpace(n.Description)
	n.EventTypes = normalizeTypes(n.EventTypes)
	if n.Signing == "" {
		n.Signing = SigningSymmetric
	}
	if n.Payload == "" {
		n.Payload = PayloadFull
	}
	if n.Ordering == "" {
		n.Ordering = Unordered
	}
	return n
}

// Validate checks a NewEndpoint against r and returns an apperr Invalid
// error naming every offending field by its API name, or nil. It validates
// the types as given, so that eventTypes[i] is the i-th type sent.
func (n NewEndpoint) Validate(r EndpointRules) error {
	var f apperr.Fields
	checkEndpointURL(&f, strings.TrimSpace(n.URL), r)
	checkDescription(&f, strings.TrimSpace(n.Description))
	checkTypes(&f, n.EventTypes)
	if n.Signing != "" {
		checkSigning(&f, n.Signing)
	}
	if n.Payload != "" {
		checkPayload(&f, n.Payload)
	}
	if n.Ordering != "" {
		checkOrdering(&f, n.Ordering)
	}
	checkRateLimit(&f, n.RateLimit)
	return f.Err()
}

// Validate checks the fields an update sets, as NewEndpoint.Validate does.
func (u EndpointUpdate) Validate(r EndpointRules) error {
	var f apperr.Fields
	if u.URL != nil {
		checkEndpointURL(&f, strings.TrimSpace(*u.URL), r)
	}
	if u.Description != nil {
		checkDescription(&f, strings.TrimSpace(*u.Description))
	}
	if u.EventTypes != nil {
		checkTypes(&f, *u.EventTypes)
	}
	if u.Signing != nil {
		checkSigning(&f, *u.Signing)
	}
	if u.Payload != nil {
		checkPayload(&f, *u.Payload)
	}
	if u.Ordering != nil {
		checkOrdering(&f, *u.Ordering)
	}
	if u.RateLimit != nil {
		checkRateLimit(&f, *u.RateLimit)
	}
	return f.Err()
}

// apply returns e with u's changes, normalized as NewEndpoint.Normalize does.
func (u EndpointUpdate) apply(e Endpoint) Endpoint {
	if u.URL != nil {
		e.URL = strings.TrimSpace(*u.URL)
	}
	if u.Description != nil {
		e.Description = strings.TrimSpace(*u.Description)
	}
	if u.EventTypes != nil {
		e.EventTypes = normalizeTypes(*u.EventTypes)
	}
	if u.Signing != nil {
		e.Signing = *u.Signing
	}
	if u.Payload != nil {
		e.Payload = *u.Payload
	}
	if u.Ordering != nil {
		e.Ordering = *u.Ordering
	}
	if u.RateLimit != nil {
		e.RateLimit = *u.RateLimit
	}
	if u.Enabled != nil {
		if *u.Enabled && !e.Enabled {
			e.DisabledReason, e.FailingSince = "", nil
		}
		e.Enabled = *u.Enabled
	}
	return e
}

// normalizeTypes keeps each known type once, in EventTypes order, then the
// unknown ones as given.
func normalizeTypes(types []EventType) []EventType {
	out := []EventType{}
	for _, t := range EventTypes {
		if slices.Contains(types, t) {
			out = append(out, t)
		}
	}
	for _, t := range types {
		if !t.Valid() {
			out = append(out, t)
		}
	}
	return out
}

func checkEndpointURL(f *apperr.Fields, raw string, r EndpointRules) {
	if raw == "" {
		f.Add("url", "is required")
		return
	}
	if msg := fieldcheck.URL(raw, r.AllowInsecureURLs); msg != "" {
		f.Add("url", "%s", msg)
		return
	}
	if !r.AllowPrivate && !publicHost(raw) {
		f.Add("url", "must be a public address (not loopback, private, link-local or multicast)")
	}
}

// publicHost reports whether the host of raw, an absolute URL, may be
// public: a host name other than localhost (what it resolves to is checked
// when each delivery connects), or a public address by the delivery guard's
// rule (netguard.CheckAddr).
func publicHost(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if fieldcheck.IsLoopbackHost(host) {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return true // a name
	}
	return netguard.CheckAddr(a) == nil
}

func checkDescription(f *apperr.Fields, s string) {
	if msg := fieldcheck.Text(s, MaxEndpointDescription); msg != "" {
		f.Add("description", "%s", msg)
	}
}

func checkTypes(f *apperr.Fields, types []EventType) {
	for i, t := range types {
		if !t.Valid() {
			f.Add("eventTypes["+strconv.Itoa(i)+"]", "is not an event type; known types are %s", knownTypes())
		}
	}
}

func checkSigning(f *apperr.Fields, s Signing) {
	if s != SigningSymmetric && s != SigningAsymmetric {
		f.Add("signing", "must be symmetric or asymmetric")
	}
}

func checkPayload(f *apperr.Fields, p Payload) {
	if p != PayloadFull && p != PayloadThin {
		f.Add("payload", "must be full or thin")
	}
}

func knownTypes() string {
	s := make([]string, len(EventTypes))
	for i, t := range EventTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
