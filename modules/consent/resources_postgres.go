package consent

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent/internal/resources"
)

// ResourceStore implements Resources on PostgreSQL.
type ResourceStore struct{ pool *pgxpool.Pool }

var _ Resources = (*ResourceStore)(nil)

// NewResources returns the data holders' resources.
func NewResources(pool *pgxpool.Pool) *ResourceStore { return &ResourceStore{pool: pool} }

// CreateResource implements Resources.
func (s *ResourceStore) CreateResource(ctx context.Context, a Author, in NewResource, before ...database.BeforeCommit[Resource]) (Resource, error) {
	in = in.Normalize()
	if err := in.Validate(); err != nil {
		return Resource{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Resource{}, err
	}
	r := Resource{ID: id.String(), OrganizationID: a.OrganizationID, URI: in.URI, Name: in.Name, CreatedBy: a.By,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	err = database.WithTx(ctx, s.pool, func(tx database.Tx) error {
		created, err := resources.Insert(ctx, tx, r.row())
		if err != nil {
			return err
		}
		if !created {
			return apperr.New(apperr.Conflict, "The resource %s is registered already.", in.URI)
		}
		return database.RunBeforeCommit(ctx, tx, r, before)
	})
	if err != nil {
		return Resource{}, err
	}
	return r, nil
}

func (r Resource) row() resources.Resource {
	return resources.Resource{OrganizationID: r.OrganizationID, ID: r.ID, URI: r.URI, Name: r.Name, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
}

func fromResourceRow(r resources.Resource) Resource {
	return Resource{ID: r.ID, OrganizationID: r.OrganizationID, URI: r.URI, Name: r.Name, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC()}
}

// ListResources implements Resources.
func (s *ResourceStore) ListResources(ctx context.Context, organizationID string) ([]Resource, error) {
	rows, err := resources.List(ctx, s.pool, organizationID)
	if err != nil {
		return nil, err
	}
	out := make([]Resource, len(rows))
	for i, r := range rows {
		out[i] = fromResourceRow(r)
	}
	return out, nil
}

// ResourceByURI implements Resources.
func (s *ResourceStore) ResourceByURI(ctx context.Context, uri string) (Resource, error) {
	r, err := resources.ByURI(ctx, s.pool, uri)
	if errors.Is(err, database.ErrNotFound) {
		return Resource{}, ErrResourceNotFound
	}
	if err != nil {
		return Resource{}, err
	}
	return fromResourceRow(r), nil
}

// unknownResources returns an apperr Unprocessable error naming
// field[i] for each of uris that no organization registered, or nil.
func unknownResources(ctx context.Context, db database.Querier, field string, uris []string) error {
	if len(uris) == 0 {
		return nil
	}
	rows, err := resources.ByURIs(ctx, db, uris)
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(rows))
	for _, r := range rows {
		known[r.URI] = true
	}
	var f []apperr.FieldError
	for i, u := range uris {
		if !known[u] {
			f = append(f, apperr.FieldError{Field: field + "[" + strconv.Itoa(i) + "]", Message: "is not a registered resource: " + u})
		}
	}
	if len(f) > 0 {
		return apperr.UnprocessableFields(f)
	}
	return nil
}

// DataHoldersTx returns the organizations that registered the resources
// version n of an organization's definition names, each once, in tx: the
// data holders whose Shared Signals streams hear of its consents (what
// ssf.DataHolders declares). A definition names only registered
// resources, and a resource is never unregistered, so the answer for a
// version never changes.
func (s *DefinitionStore) DataHoldersTx(ctx context.Context, tx database.Tx, organizationID, id string, n int) ([]string, error) {
	v, err := s.VersionTx(ctx, tx, organizationID, id, n)
	if err != nil || len(v.Resources) == 0 {
		return nil, err
	}
	rows, err := resources.ByURIs(ctx, tx, v.Resources)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, r.OrganizationID) {
			out = append(out, r.OrganizationID)
		}
	}
	return out, nil
}
