package consent

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/fieldcheck"
)

// A resource is an API a data holder serves: the tax authority's income
// records, a bank's balances. The data holder's organization registers it,
// and other organizations' consent definitions name it by its URI as what
// their consents open. A consent token names the resource as its audience
// (RFC 8707), and only the organization that registered it may introspect
// such tokens.

// Resource is a registered resource.
type Resource struct {
	ID             string
	OrganizationID string // the data holder
	URI            string // absolute, no fragment: a consent token's aud
	Name           string
	CreatedBy      string // "client:<id>", "staff:<username>" or "cli"
	CreatedAt      time.Time
}

// NewResource is a resource to register.
type NewResource struct {
	URI  string
	Name string
}

// Limits of a resource.
const (
	MaxResourceName = 200
	// MaxResources bounds the resources one definition version names.
	MaxResources = 20
)

// Normalize trims the surrounding white space of in's fields.
func (in NewResource) Normalize() NewResource {
	return NewResource{URI: strings.TrimSpace(in.URI), Name: strings.TrimSpace(in.Name)}
}

// Validate checks a normalized in and returns an apperr Invalid error naming
// uri and name.
func (in NewResource) Validate() error {
	var f apperr.Fields
	if msg := CheckResourceURI(in.URI); msg != "" {
		f.Add("uri", "%s", msg)
	}
	if in.Name == "" {
		f.Add("name", "is required")
	} else if msg := fieldcheck.Text(in.Name, MaxResourceName); msg != "" {
		f.Add("name", "%s", msg)
	}
	return f.Err()
}

// CheckResourceURI reports what is wrong with a resource's URI, or "": RFC
// 8707 asks for an absolute URI without a fragment; flowd also holds it to
// fieldcheck.MaxURL bytes of text without control characters.
func CheckResourceURI(raw string) string {
	if raw == "" {
		return "is required"
	}
	if len(raw) > fieldcheck.MaxURL {
		return "must be at most 2048 characters"
	}
	if strings.ContainsFunc(raw, fieldcheck.IsControlOrFormat) || strings.ContainsAny(raw, " \t") {
		return "must be a URI without spaces, control or formatting characters"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs() || (u.Host == "" && u.Opaque == ""):
		return "must be an absolute URI, such as https://api.tax.example/income"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a fragment (RFC 8707)"
	}
	return ""
}

// ErrResourceNotFound: no resource has the URI.
var ErrResourceNotFound = errors.New("resource not found")

// Resources keeps the data holders' resources.
type Resources interface {
	// CreateResource validates in (apperr Invalid) and registers it as
	// a's organization's. A URI registered before, by any organization, is
	// apperr Conflict. before runs in the create's transaction (see
	// database.BeforeCommit); its error undoes the create and is returned.
	CreateResource(ctx context.Context, a Author, in NewResource, before ...database.BeforeCommit[Resource]) (Resource, error)
	// ListResources returns an organization's resources, oldest first.
	ListResources(ctx context.Context, organizationID string) ([]Resource, error)
	// ResourceByURI returns the resource registered with uri, whichever
	// organization's it is. ErrResourceNotFound.
	ResourceByURI(ctx context.Context, uri string) (Resource, error)
}
