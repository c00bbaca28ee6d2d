package orgs

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/fieldcheck"
	"github.com/flowd/flowd/modules/identity"
)

// Client is an API client of an organization: the holder of a client id and
// a secret, or public keys for private_key_jwt, or both, that obtains tokens
// from the built-in provider.
type Client struct {
	ID             string
	OrganizationID string
	Name           string
	HasSecret      bool       // false for an assertion-only client
	Keys           ClientKeys // its public keys; zero when it has none
	Scopes         []string
	Sandbox        bool
	CreatedAt      time.Time
	LastUsedAt     *time.Time
	RevokedAt      *time.Time
	// DPoPBound requires DPoP proofs at the token endpoint (RFC 9449 5.2's
	// dpop_bound_access_tokens), so that every token it gets is DPoP-bound.
	DPoPBound bool
	// RateLimit is its own API rate limit, if it has one.
	RateLimit identity.RateLimit
}

// Revoked reports whether the client may no longer obtain or use tokens.
func (c Client) Revoked() bool { return c.RevokedAt != nil }

// AuthMethods returns how the client may authenticate, in the words of
// token_endpoint_auth_methods_supported.
func (c Client) AuthMethods() []string {
	var out []string
	if c.HasSecret {
		out = append(out, identity.AuthSecretBasic, identity.AuthSecretPost)
	}
	if !c.Keys.IsZero() {
		out = append(out, identity.AuthPrivateKeyJWT)
	}
	return out
}

// NewClient is the input of CreateClient.
type NewClient struct {
	OrganizationID string
	Name           string   // "API client" when empty
	Scopes         []string // identity.AllScopes when empty
	Sandbox        bool
	// Keys, when given, let the client authenticate with private_key_jwt;
	// it then gets no secret unless AlsoSecret is set (to migrate).
	Keys       ClientKeys
	AlsoSecret bool
	DPoPBound  bool // see Client.DPoPBound
}

// Validate checks the input and fills in defaults; it returns an apperr
// Invalid error naming every bad field.
func (n *NewClient) Validate() error {
	var f apperr.Fields
	n.Name = strings.TrimSpace(n.Name)
	if n.Name == "" {
		n.Name = "API client"
	}
	if msg := fieldcheck.Text(n.Name, 200); msg != "" {
		f.Add("name", "%s", msg)
	}
	if n.OrganizationID == "" {
		f.Add("organizationId", "is required")
	}
	scopes, err := normalizeScopes(n.Scopes)
	if err != nil {
		f.Add("scopes", "%v", err)
	}
	n.Scopes = scopes
	return f.Err()
}

// normalizeScopes checks scopes against identity.AllScopes and returns them
// without duplicates in that order; no scope at all means all of them.
func normalizeScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return slices.Clone(identity.AllScopes), nil
	}
	for _, s := range scopes {
		if !slices.Contains(identity.AllScopes, s) {
			return nil, fmt.Errorf("unknown scope %q (known: %s)", s, strings.Join(identity.AllScopes, " "))
		}
	}
	return identity.OrderedScopes(scopes), nil
}

// ClientCredentials is a client with its secret, which is shown once: only a
// slow hash of it is kept.
type ClientCredentials struct {
	Client
	Secret string
}

// ExternalClient maps a client of an external issuer to an organization, for
// tokens that carry no organization claim. Its client id also counts as an
// accepted audience of that issuer's tokens.
type ExternalClient struct {
	Issuer         string
	ClientID       string
	OrganizationID string
	Scopes         []string // granted when the token carries none of flowd's scopes
	Sandbox        bool
	CreatedAt      time.Time
	RateLimit      identity.RateLimit // its own API rate limit, if it has one
}

// Validate checks the input and fills in defaults.
func (x *ExternalClient) Validate() error {
	var f apperr.Fields
	x.Issuer = strings.TrimSpace(x.Issuer)
	x.ClientID = strings.TrimSpace(x.ClientID)
	if u, err := url.Parse(x.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		f.Add("issuer", "must be the issuer's absolute URL")
	}
	if x.ClientID == "" || len(x.ClientID) > 255 || strings.ContainsFunc(x.ClientID, fieldcheck.IsControlOrFormat) {
		f.Add("clientId", "is required, at most 255 characters without control or formatting characters")
	}
	if x.OrganizationID == "" {
		f.Add("organizationId", "is required")
	}
	scopes, err := normalizeScopes(x.Scopes)
	if err != nil {
		f.Add("scopes", "%v", err)
	}
	x.Scopes = scopes
	return f.Err()
}

// ClientChange is a client as a change found it and as it left it, both
// read in the change's transaction.
type ClientChange struct {
	Before, After Client
}

// StoredClient is a client as the token service authenticates it: with
// the verifiers of its secret, never the secret itself.
type StoredClient struct {
	Client
	// SecretHash is the argon2id hash of its secret; empty for an
	// assertion-only client.
	SecretHash string
	// SecretMAC is the secret's keyed MAC, tagged with the SecretHash it
	// was made beside; nil until made.
	SecretMAC []byte
}

// ClientState is what bearer verification needs of a client on every
// request: what may change after its tokens were signed.
type ClientState struct {
	OrganizationID string
	Sandbox        bool
	Revoked        bool
	RateLimit      identity.RateLimit
}

// Errors of clients.
var (
	// ErrClientNotFound: no client has the id, or not in the organization named.
	ErrClientNotFound = apperr.New(apperr.NotFound, "No such API client.")
	// ErrNoClientSecret refuses to rotate the secret of an assertion-only
	// client: a rotation would give it a secret it was made without.
	ErrNoClientSecret = apperr.New(apperr.Conflict, "The client has no secret: it authenticates with private_key_jwt; replace its keys instead.")
)
