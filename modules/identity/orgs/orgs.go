// Package orgs is identity's part that keeps organizations, the customers
// of flowd, and their API clients: the clients' credentials and keys, the
// mappings of an external issuer's clients, and the clients' API rate
// limits, which Limits holds them to. The token service authenticates
// clients and verifies their tokens through what this part offers
// (ClientRecords); it never reads these tables itself.
package orgs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/fieldcheck"
	"github.com/flowd/flowd/modules/identity"
)

// Organization is a customer of flowd: a bank or lender that asks individuals
// for consent. Its settings shape the flows it creates.
type Organization struct {
	ID                 string
	Name               string
	OrganizationNumber string // empty when not given
	// ReferencePrefix starts the reference id of every flow, e.g. "DEMO".
	ReferencePrefix string
	// RedirectOrigins are the origins a flow's redirectUrl may point to; empty allows any.
	RedirectOrigins []string
	CreatedAt       time.Time
}

// NewOrganization is the input of CreateOrganization.
type NewOrganization struct {
	Name               string
	OrganizationNumber string
	ReferencePrefix    string // derived from Name when empty
	RedirectOrigins    []string
}

var prefixPattern = regexp.MustCompile(`^[A-Z0-9]{2,8}$`)

// Validate checks the input and fills in the derived reference prefix; it
// returns an apperr Invalid error naming every bad field.
func (n *NewOrganization) Validate() error {
	var f apperr.Fields
	n.Name = strings.TrimSpace(n.Name)
	n.OrganizationNumber = strings.TrimSpace(n.OrganizationNumber)
	n.ReferencePrefix = strings.ToUpper(strings.TrimSpace(n.ReferencePrefix))
	if n.Name == "" {
		f.Add("name", "is required")
	} else if msg := fieldcheck.Text(n.Name, 200); msg != "" {
		f.Add("name", "%s", msg)
	}
	checkOrganizationNumber(&f, n.OrganizationNumber)
	if n.ReferencePrefix == "" && n.Name != "" {
		n.ReferencePrefix = DerivePrefix(n.Name)
	}
	if !prefixPattern.MatchString(n.ReferencePrefix) {
		f.Add("referencePrefix", "must be 2 to 8 letters A-Z or digits")
	}
	for i, o := range n.RedirectOrigins {
		origin, err := normalizeOrigin(o)
		if err != nil {
			f.Add("redirectOrigins", "%q: %v", o, err)
			continue
		}
		n.RedirectOrigins[i] = origin
	}
	return f.Err()
}

// DerivePrefix makes a reference prefix from an organization's name: the
// upper-case letters and digits of its initials when it has several words,
// else of the name itself; 2 to 8 characters, "ORG" padding when too short.
func DerivePrefix(name string) string {
	keep := func(s string) string {
		var b strings.Builder
		for _, r := range strings.ToUpper(s) {
			if t, ok := transliterations[r]; ok {
				b.WriteString(t)
			} else if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	all := keep(name)
	words := strings.Fields(name)
	p := all
	if len(words) > 1 {
		var initials strings.Builder
		for _, w := range words {
			initials.WriteString(firstRune(keep(w)))
		}
		if initials.Len() >= 2 {
			p = initials.String()
		}
	}
	if len(p) > 8 {
		p = p[:8]
	}
	if len(p) < 2 {
		p = (p + "ORG")[:3]
	}
	return p
}

// transliterations spell the letters of Nordic and other European names in A-Z.
var transliterations = map[rune]string{
	'Æ': "AE", 'Ø': "O", 'Å': "A", 'Ä': "A", 'Ö': "O", 'Ü': "U", 'ß': "SS", 'É': "E", 'È': "E", 'Ê': "E",
	'Á': "A", 'À': "A", 'Í': "I", 'Ó': "O", 'Ú': "U", 'Ñ': "N", 'Ç': "C", 'Ð': "D", 'Þ': "TH",
}

func firstRune(s string) string {
	if s == "" {
		return ""
	}
	return s[:1]
}

// OrganizationUpdate is the input of UpdateOrganization: the settings staff
// may change in the console. The name and id are not among them.
type OrganizationUpdate struct {
	ID                 string
	ReferencePrefix    string
	OrganizationNumber string
	// RedirectOrigins are origins such as https://bank.example; empty allows any.
	RedirectOrigins []string
}

// MaxRedirectOrigins bounds an organization's redirect allow-list.
const MaxRedirectOrigins = 50

// Validate normalizes the input and returns an apperr Invalid error naming
// every bad field (referencePrefix, organizationNumber, redirectOrigins).
// An origin is scheme and host (and port) only: a path, query or user info
// would suggest a check the allow-list does not make.
func (u *OrganizationUpdate) Validate() error {
	var f apperr.Fields
	u.ReferencePrefix = strings.ToUpper(strings.TrimSpace(u.ReferencePrefix))
	u.OrganizationNumber = strings.TrimSpace(u.OrganizationNumber)
	if !prefixPattern.MatchString(u.ReferencePrefix) {
		f.Add("referencePrefix", "must be 2 to 8 letters A-Z or digits")
	}
	checkOrganizationNumber(&f, u.OrganizationNumber)
	var origins []string
	for _, raw := range u.RedirectOrigins {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		parsed, err := url.Parse(raw)
		if err == nil && (parsed.User != nil || strings.Trim(parsed.Path, "/") != "" || parsed.RawQuery != "" || parsed.Fragment != "") {
			f.Add("redirectOrigins", "%q: must be an origin such as https://bank.example, without a path", raw)
			continue
		}
		origin, err := normalizeOrigin(raw)
		if err != nil {
			f.Add("redirectOrigins", "%q: %v", raw, err)
			continue
		}
		if !slices.Contains(origins, origin) {
			origins = append(origins, origin)
		}
	}
	if len(origins) > MaxRedirectOrigins {
		f.Add("redirectOrigins", "must list at most %d origins", MaxRedirectOrigins)
	}
	u.RedirectOrigins = origins
	return f.Err()
}

// checkOrganizationNumber holds an organization number to at most 64 bytes
// of text without control or formatting characters.
func checkOrganizationNumber(f *apperr.Fields, number string) {
	if len(number) > 64 {
		f.Add("organizationNumber", "must be at most 64 characters")
	} else if msg := fieldcheck.Text(number, 64); msg != "" {
		f.Add("organizationNumber", "%s", msg)
	}
}

// normalizeOrigin accepts an absolute http(s) URL and returns its origin.
func normalizeOrigin(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.ContainsFunc(s, fieldcheck.IsControlOrFormat) {
		return "", errors.New(fieldcheck.ControlOrFormatMessage)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("must be an absolute http(s) URL")
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

// ErrOrganizationNotFound: no organization has the id.
var ErrOrganizationNotFound = apperr.New(apperr.NotFound, "No such organization.")

// Organizations manages organizations.
type Organizations interface {
	// CreateOrganization validates in (apperr Invalid) and stores it.
	CreateOrganization(ctx context.Context, in NewOrganization) (Organization, error)
	// CreateOrganizationTx is CreateOrganization inside the caller's
	// transaction, so that other modules set up the organization in the same
	// unit (the webhooks module's signing secret).
	CreateOrganizationTx(ctx context.Context, tx database.Tx, in NewOrganization) (Organization, error)
	// Organization returns one organization with its settings. ErrOrganizationNotFound.
	Organization(ctx context.Context, id string) (Organization, error)
	// ListOrganizations returns every organization, oldest first.
	ListOrganizations(ctx context.Context) ([]Organization, error)
	// UpdateOrganization validates u (apperr Invalid) and replaces the
	// organization's settings; new flows take them at once. before runs in
	// the update's transaction with the settings it replaced and the new
	// ones (see database.BeforeCommit); its error undoes the update and is
	// returned. ErrOrganizationNotFound.
	UpdateOrganization(ctx context.Context, u OrganizationUpdate, before ...database.BeforeCommit[OrganizationChange]) (Organization, error)
	// OrganizationExists reports whether an organization of id exists.
	OrganizationExists(ctx context.Context, id string) (bool, error)
}

// OrganizationChange is an organization as an update found it and as it
// left it, both read in the update's transaction: an audit entry names
// what changed even when two admins save at once.
type OrganizationChange struct {
	Before, After Organization
}

// Clients manages API clients and external client mappings.
type Clients interface {
	// CreateClient makes a client and its secret, shown only now (no
	// secret for a client with Keys, unless AlsoSecret). before
	// runs in the create's transaction (see database.BeforeCommit); its error
	// undoes the create and is returned. ErrOrganizationNotFound, apperr Invalid.
	CreateClient(ctx context.Context, in NewClient, before ...database.BeforeCommit[ClientCredentials]) (ClientCredentials, error)
	// Client returns one client. ErrClientNotFound.
	Client(ctx context.Context, clientID string) (Client, error)
	// ListClients returns an organization's clients, oldest first.
	ListClients(ctx context.Context, organizationID string) ([]Client, error)
	// RotateClientSecret gives the client a new secret; the old one stops
	// working at once, and so do the client's refresh tokens. before runs in
	// the rotation's transaction (see database.BeforeCommit); its error keeps
	// the old secret and is returned.
	// ErrClientNotFound (also for another organization's or a revoked
	// client), ErrNoClientSecret for an assertion-only client.
	RotateClientSecret(ctx context.Context, organizationID, clientID string, before ...database.BeforeCommit[ClientCredentials]) (ClientCredentials, error)
	// ReplaceClientKeys replaces the client's public keys (private_key_jwt)
	// by keys, which are validated (apperr Invalid); its secret, if any,
	// stays. before runs in the replacement's transaction (see
	// database.BeforeCommit); its error keeps the old keys and is returned.
	// ErrClientNotFound (also for another organization's or a revoked client).
	ReplaceClientKeys(ctx context.Context, organizationID, clientID string, keys ClientKeys, before ...database.BeforeCommit[Client]) (Client, error)
	// RevokeClient stops the client: it can obtain no token, and the tokens it
	// holds stop working at once on every instance. before runs in the
	// revocation's transaction (see database.BeforeCommit); its error leaves
	// the client working and is returned. ErrClientNotFound.
	RevokeClient(ctx context.Context, organizationID, clientID string, before ...database.BeforeCommit[Client]) (Client, error)
	// SetClientDPoP turns DPoP-bound access tokens on or off for a client
	// (Client.DPoPBound); tokens it already holds are unchanged. before runs
	// in the change's transaction, only when the setting changes, with the
	// client as it was and as it is now; its error undoes the change and is
	// returned. ErrClientNotFound
	// (also for another organization's or a revoked client).
	SetClientDPoP(ctx context.Context, organizationID, clientID string, on bool, before ...database.BeforeCommit[ClientChange]) (Client, error)
	// SetClientRateLimit gives a client its own API rate limit, or returns
	// it to the default with a zero RateLimit; every instance applies it
	// within moments. before runs in the change's transaction, only when
	// the limit changes, with the client as it was and as it is now; its
	// error undoes the change and is returned. apperr Invalid,
	// ErrClientNotFound (also for another organization's or a revoked client).
	SetClientRateLimit(ctx context.Context, organizationID, clientID string, limit identity.RateLimit, before ...database.BeforeCommit[ClientChange]) (Client, error)
	// SetExternalClientRateLimit does the same for a mapped client of an
	// external issuer; before runs in the change's transaction. apperr
	// Invalid, ErrClientNotFound when the client is not mapped.
	SetExternalClientRateLimit(ctx context.Context, issuer, clientID string, limit identity.RateLimit, before ...database.BeforeCommit[ExternalClient]) (ExternalClient, error)
	// MapExternalClient maps an external issuer's client id to an
	// organization, replacing an earlier mapping. ErrOrganizationNotFound, apperr Invalid.
	MapExternalClient(ctx context.Context, in ExternalClient) (ExternalClient, error)
	// ListExternalClients returns an organization's mapped external clients.
	ListExternalClients(ctx context.Context, organizationID string) ([]ExternalClient, error)
}

// ClientRecords is what the token service reads and records of clients,
// organizations and external issuers' clients. The reads on the path of
// every API request come from memory while the change feed listens.
type ClientRecords interface {
	// StoredClient returns a client with the verifiers of its secret, read
	// from the database. ErrClientNotFound.
	StoredClient(ctx context.Context, clientID string) (StoredClient, error)
	// ClientState returns what bearer verification needs of a client, and
	// false when there is no such client.
	ClientState(ctx context.Context, clientID string) (ClientState, bool, error)
	// ExternalClient returns the mapping of a client of issuer (as
	// MapExternalClient stores it, without a trailing slash), and false
	// when it is not mapped.
	ExternalClient(ctx context.Context, issuer, clientID string) (ExternalClient, bool, error)
	// OrganizationExists reports whether an organization of id exists.
	OrganizationExists(ctx context.Context, id string) (bool, error)
	// SetClientSecretMAC stores the MAC of a client's secret beside the
	// hash it was checked against, unless the hash has changed meanwhile.
	SetClientSecretMAC(ctx context.Context, clientID, hash string, mac []byte) error
	// TouchClient records that a client obtained a token, at most once a
	// minute, so that busy clients do not write on every request.
	TouchClient(ctx context.Context, clientID string) error
}

// APILimits holds API clients to their rate limits across instances.
type APILimits interface {
	// AdmitAPIRequest counts one API request of p's client in the client's
	// current window, unless the client has used up its limit there
	// (Allowed false). It reads no database: each instance counts in
	// memory and reconciles its counts with the other instances' in Run.
	AdmitAPIRequest(p identity.Principal) RateLimitStatus
}

// Grants ends what a client was granted when its secret is replaced or it
// is revoked, in the transaction of that change: the token service's
// refresh tokens.
type Grants interface {
	RevokeClientGrantsTx(ctx context.Context, tx database.Tx, clientID string) error
}
