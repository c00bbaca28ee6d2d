// Package record is the consent record in the shape of ISO/IEC TS 27560:
// the document GET /api/flows/{id}/consent-record answers, its JSON Schema
// (served at /schemas/consent-record.json) and the check of a record or a
// consent receipt's claims against that schema ("flowd receipts lint").
// Fields are named as the standard's record and DPV's guide to it name
// them (snake_case), so that a reader of the standard finds each one; the
// states are DPV's consent states.
package record

import "time"

// SchemaVersion is the version of the record's shape, its schema_version.
const SchemaVersion = "flowd-consent-record/1"

// SchemaPath is where flowd serves the schema.
const SchemaPath = "/schemas/consent-record.json"

// The consent states of DPV (dpv:ConsentStatus) a record's consent_status
// and its events' event_state take.
const (
	Requested = "ConsentRequested"
	Given     = "ConsentGiven"
	Refused   = "ConsentRefused"
	// Withdrawn is a withdrawal by the person, Revoked one by anyone else:
	// here the organization, on the person's behalf.
	Withdrawn = "ConsentWithdrawn"
	Revoked   = "ConsentRevoked"
	Expired   = "ConsentExpired"
	// Deferred is a request that ended without a decision: cancelled, or
	// its link expired.
	Deferred = "ConsentRequestDeferred"
	// Unknown is an erased consent: nothing of it is left to tell.
	Unknown = "ConsentUnknown"
)

// Event types: what happened, in the words of the record's events.
const (
	EventRequested = "consent_requested"
	EventPresented = "notice_presented"
	EventGiven     = "consent_given"
	EventRefused   = "consent_refused"
	EventWithdrawn = "consent_withdrawn"
	EventExpired   = "consent_expired"
	EventCancelled = "request_cancelled"
	EventErased    = "record_erased"
)

// Who made an event happen (event_by).
const (
	ByPrincipal  = "pii_principal"
	ByController = "pii_controller"
	BySystem     = "system"
)

// LawfulBasis is every record's lawful basis: consent, as DPV names it.
const LawfulBasis = "dpv:Consent"

// Record is one consent, from its request to its end, and after an
// erasure only what is left of it: no pii_principal_id, no notice, no
// parameters.
type Record struct {
	SchemaVersion string   `json:"schema_version"`
	RecordID      string   `json:"record_id"` // the flow's id
	ReceiptIDs    []string `json:"receipt_ids"`
	// PIIPrincipalID names the person by the pseudonym their receipts name
	// them by (a keyed hash of the national id under the organization's
	// salt), never by the national id; null once erased.
	PIIPrincipalID   *string           `json:"pii_principal_id"`
	ConsentStatus    string            `json:"consent_status"`
	Notice           *Notice           `json:"notice,omitempty"`
	Language         string            `json:"language,omitempty"`
	PIIControllers   []Party           `json:"pii_controllers"`
	Purposes         []Purpose         `json:"purposes,omitempty"`
	CollectionMethod *CollectionMethod `json:"collection_method,omitempty"`
	ValidUntil       string            `json:"valid_until,omitempty"`
	Events           []Event           `json:"events"`
	WithdrawalMethod *WithdrawalMethod `json:"withdrawal_method,omitempty"`
	Parameters       map[string]string `json:"parameters,omitempty"`
}

// Text is a text in the languages the consent pages speak.
type Text struct {
	EN string `json:"en"`
	NB string `json:"nb"`
}

// Notice is the text the person was shown: the consent definition
// version, and the SHA-256 of its canonical text with the flow's
// parameters.
type Notice struct {
	DefinitionID      string `json:"definition_id"`
	DefinitionVersion int    `json:"definition_version"`
	VersionTag        string `json:"version_tag,omitempty"`
	Title             Text   `json:"title"`
	TextSHA256        string `json:"text_sha256"`
}

// Party is an organization.
type Party struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Purpose is what the consent is for, with the data it covers and who
// receives it.
type Purpose struct {
	PurposeID      string      `json:"purpose_id"`
	Purpose        Text        `json:"purpose"`
	Description    Text        `json:"description"`
	LawfulBasis    string      `json:"lawful_basis"`
	PIIInformation []Text      `json:"pii_information"`
	Recipients     []Recipient `json:"recipients"`
	// ValidityDuration and RetentionPeriod are ISO 8601 durations; absent:
	// until withdrawn, and until deleted.
	ValidityDuration string `json:"validity_duration,omitempty"`
	RetentionPeriod  string `json:"retention_period,omitempty"`
}

// Recipient roles.
const (
	RoleRecipient  = "recipient"   // receives the data, as the text names it
	RoleDataHolder = "data_holder" // releases the data on a consent token
)

// Recipient receives the person's data, or what the consent opens: a data
// holder's resource, which learns of the consent from its tokens.
type Recipient struct {
	Role           string `json:"role"`
	Name           string `json:"name"`
	URI            string `json:"uri,omitempty"`
	OrganizationID string `json:"organization_id,omitempty"`
}

// CollectionMethod is how the consent was asked for and the person
// proven.
type CollectionMethod struct {
	Method            string     `json:"method"`
	IdentityAssurance *Assurance `json:"identity_assurance,omitempty"`
}

// MethodWebForm is flowd's only collection method: the consent page on
// the person's link, after an eID sign-in unless the deployment turned the
// proof off.
const MethodWebForm = "web_form"

// Assurance is how sure the eID was of the person.
type Assurance struct {
	Level string `json:"level"`
	ACR   string `json:"acr,omitempty"`
}

// Event is a change of the consent's state.
type Event struct {
	EventTime  string `json:"event_time"`
	EventType  string `json:"event_type"`
	EventState string `json:"event_state"`
	EventBy    string `json:"event_by"`
}

// WithdrawalMethod says how the consent is withdrawn: by the person on
// their own page, by the organization through the API.
type WithdrawalMethod struct {
	URL string `json:"url"`
	API string `json:"api"`
}

// Time is how a record writes instants: RFC 3339 in UTC with milliseconds,
// as the API does.
func Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
