package orgs

import (
	"strconv"
	"strings"

	"github.com/flowd/flowd/modules/identity"
)

// The audit log's details of changes to API clients, the same whether staff
// made them in the console or an operator with the CLI: what an auditor
// needs, never a secret or key material.

// ClientCreatedDetail describes a new client: its name, scopes, how it
// authenticates and what it must use.
func ClientCreatedDetail(c Client) string {
	detail := c.Name + "; scopes " + strings.Join(c.Scopes, " ")
	if c.Sandbox {
		detail += "; sandbox"
	}
	detail += authDetail(c)
	if c.DPoPBound {
		detail += "; DPoP required"
	}
	return detail
}

// ClientKeysDetail describes a replacement of a client's keys.
func ClientKeysDetail(c Client) string { return c.Name + authDetail(c) }

// DPoPAuditDetail describes a change to c's DPoP requirement.
func DPoPAuditDetail(c Client) string {
	if c.DPoPBound {
		return c.Name + "; DPoP required: token requests without a DPoP proof are refused"
	}
	return c.Name + "; DPoP no longer required: bearer tokens may be obtained"
}

// RateLimitAuditDetail describes a change to the API rate limit of the
// client named name, whose limit is now r.
func RateLimitAuditDetail(name string, r identity.RateLimit) string {
	switch {
	case !r.Own:
		return name + "; API rate limit: the default"
	case r.PerMinute == 0:
		return name + "; API rate limit: none"
	}
	return name + "; API rate limit: " + strconv.Itoa(r.PerMinute) + " requests per minute"
}

// authDetail is how a client authenticates: the methods and where its keys
// are, never the keys.
func authDetail(c Client) string {
	detail := "; auth " + strings.Join(c.AuthMethods(), " ")
	switch {
	case c.Keys.JWKSURI != "":
		detail += " (jwks_uri " + c.Keys.JWKSURI + ")"
	case !c.Keys.IsZero():
		detail += " (keys given inline)"
	}
	return detail
}
