package tokens

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/flowd/flowd/internal/database"
)

// Consent tokens (RFC 9396 with RFC 8707): an API client of the
// organization that holds a person's accepted consent asks the token
// endpoint for a short access token addressed to a data holder's resource,
// whose authorization_details say who consented, to whom, until when, to
// what and under which text. The data holder verifies it offline with the
// published keys, or asks the introspection endpoint whether the consent
// still stands. Every token issued is a use on the flow's ledger.

// ConsentDetailsType is the authorization_details type of consent tokens.
const ConsentDetailsType = "urn:flowd:consent"

// DefaultConsentTokenTTL is how long a consent token lives unless
// FLOWD_CONSENT_TOKEN_TTL says otherwise; never past the consent's
// validity.
const DefaultConsentTokenTTL = 120 * time.Second

// Errors of Consents.
var (
	// ErrNoConsent: no flow of the organization has the id; unknown,
	// deleted, erased or another organization's alike.
	ErrNoConsent = errors.New("no such consent")
	// ErrUnknownResource: no resource is registered with the URI.
	ErrUnknownResource = errors.New("no such resource")
	// ErrConsentNotInForce: the consent was not accepted, or no longer in
	// force, when its use was to be recorded.
	ErrConsentNotInForce = errors.New("consent not in force")
)

// Consent is a flow's consent as a consent token carries it, read when it
// is asked for.
type Consent struct {
	FlowID           string
	OrganizationID   string // the organization that asked for the consent
	OrganizationName string
	// NationalIDFormat names the format of NationalID (no, se, generic…);
	// NationalID is the person's number in its canonical form.
	NationalIDFormat string
	NationalID       string
	Status           string // the consent status: Accepted, Withdrawn, Expired…
	DecidedAt        time.Time
	ValidUntil       *time.Time // nil: until withdrawn
	// Resources are the URIs of the resources the flow's definition
	// version names: the audiences its consent tokens may have.
	Resources         []string
	Parameters        map[string]string
	DefinitionID      string
	DefinitionVersion int
	TextSHA256        []byte // of the text the person accepted
}

// StatusAccepted is the consent status of a consent that may be in force.
const StatusAccepted = "Accepted"

// InForce reports whether the consent may be used at now: accepted and
// inside its validity.
func (c Consent) InForce(now time.Time) bool {
	return c.Status == StatusAccepted && (c.ValidUntil == nil || now.Before(*c.ValidUntil))
}

// Resource is a data holder's registered resource.
type Resource struct {
	URI            string
	Name           string
	OrganizationID string // the data holder
}

// ConsentUse is the use a consent token makes of a consent, for the flow's
// ledger.
type ConsentUse struct {
	OrganizationID string
	ClientID       string
	FlowID         string
	Resource       string // the token's audience
	TokenID        string // the token's jti
}

// Consents is what consent tokens need of the flows and consent modules;
// cmd/flowd/internal/wiring implements it on them.
type Consents interface {
	// Consent returns organizationID's consent of flow flowID as it is now.
	// ErrNoConsent.
	Consent(ctx context.Context, organizationID, flowID string) (Consent, error)
	// Resource returns the resource registered with uri, whichever
	// organization's it is. ErrUnknownResource.
	Resource(ctx context.Context, uri string) (Resource, error)
	// RecordTokenUse reads organizationID's consent of u's flow, asks
	// check of it, and then records u on the flow's ledger, with its
	// flow.used event, in one transaction, unless the consent stopped
	// being in force since the read. check's error is RecordTokenUse's.
	// When the consent is not in force, nothing is recorded but refused,
	// which runs in a transaction of its own that commits, and the error
	// is ErrConsentNotInForce. ErrNoConsent.
	RecordTokenUse(ctx context.Context, u ConsentUse, check func(Consent) error, refused func(ctx context.Context, tx database.Tx) error) error
}

// ConsentDetail is the authorization_details entry of a consent token.
type ConsentDetail struct {
	Type       string            `json:"type"`
	ID         string            `json:"id"` // the flow's id
	From       ConsentFrom       `json:"from"`
	To         ConsentTo         `json:"to"`
	Consented  string            `json:"consented"` // RFC 3339, UTC
	ValidTo    *string           `json:"validTo"`   // RFC 3339; null: until withdrawn
	Resources  []string          `json:"resources"` // the token's audience
	Parameters map[string]string `json:"parameters"`
	Definition ConsentDefinition `json:"definition"`
}

// ConsentFrom names the person who consented.
type ConsentFrom struct {
	Format     string `json:"format"`
	NationalID string `json:"nationalId"`
}

// ConsentTo names the organization the consent was given to.
type ConsentTo struct {
	OrganizationID   string `json:"organizationId"`
	OrganizationName string `json:"organizationName"`
}

// ConsentDefinition names the definition version and the text accepted.
type ConsentDefinition struct {
	ID         string `json:"id"`
	Version    int    `json:"version"`
	TextSHA256 string `json:"textSha256"` // hex, as receipts write it
}

// consentClaims are the claims of a consent token: those of RFC 9068 and
// the consent's authorization_details.
type consentClaims struct {
	Issuer               string          `json:"iss"`
	Subject              string          `json:"sub"`
	ClientID             string          `json:"client_id"`
	Audience             string          `json:"aud"`
	Expiry               int64           `json:"exp"`
	IssuedAt             int64           `json:"iat"`
	NotBefore            int64           `json:"nbf"`
	ID                   string          `json:"jti"`
	Confirmation         *confirmation   `json:"cnf,omitempty"`
	AuthorizationDetails []ConsentDetail `json:"authorization_details"`
}

// consentDetail makes the authorization_details entry of c for a token
// addressed to resource.
func consentDetail(c Consent, resource string) ConsentDetail {
	d := ConsentDetail{Type: ConsentDetailsType, ID: c.FlowID,
		From:       ConsentFrom{Format: c.NationalIDFormat, NationalID: c.NationalID},
		To:         ConsentTo{OrganizationID: c.OrganizationID, OrganizationName: c.OrganizationName},
		Consented:  c.DecidedAt.UTC().Format(time.RFC3339),
		Resources:  []string{resource},
		Parameters: c.Parameters,
		Definition: ConsentDefinition{ID: c.DefinitionID, Version: c.DefinitionVersion, TextSHA256: hex.EncodeToString(c.TextSHA256)},
	}
	if d.Parameters == nil {
		d.Parameters = map[string]string{}
	}
	if c.ValidUntil != nil {
		v := c.ValidUntil.UTC().Format(time.RFC3339)
		d.ValidTo = &v
	}
	return d
}

// requestedConsent is what a request's authorization_details may hold: one
// entry of type ConsentDetailsType naming a flow, and nothing else.
type requestedConsent struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// maxAuthorizationDetails bounds the authorization_details parameter.
const maxAuthorizationDetails = 4 << 10

// parseAuthorizationDetails reads a request's authorization_details, or
// says what is wrong with them, in words safe to show the client.
func parseAuthorizationDetails(raw string) (requestedConsent, string) {
	if len(raw) > maxAuthorizationDetails {
		return requestedConsent{}, "authorization_details is too long."
	}
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		return requestedConsent{}, "authorization_details must be a JSON array of objects (RFC 9396 2)."
	}
	if len(entries) != 1 {
		return requestedConsent{}, "authorization_details must hold exactly one entry."
	}
	var typed struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(entries[0], &typed); err != nil || typed.Type == nil {
		return requestedConsent{}, "Each authorization_details entry must be an object with a type."
	}
	if *typed.Type != ConsentDetailsType {
		return requestedConsent{}, "The authorization_details type is unknown; the supported type is " + ConsentDetailsType + "."
	}
	var rc requestedConsent
	dec := json.NewDecoder(bytes.NewReader(entries[0]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rc); err != nil {
		return requestedConsent{}, "An " + ConsentDetailsType + " entry has only type and id (a flow id), both strings."
	}
	if rc.ID == "" {
		return requestedConsent{}, "An " + ConsentDetailsType + " entry needs the id of a flow."
	}
	return rc, ""
}
