// Package resources is the consent module's SQL for the data holders'
// resources.
package resources

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Resource is a row of resources.
type Resource struct {
	OrganizationID string    `db:"organization_id"`
	ID             string    `db:"id"`
	URI            string    `db:"uri"`
	Name           string    `db:"name"`
	CreatedBy      string    `db:"created_by"`
	CreatedAt      time.Time `db:"created_at"`
}

const columns = `organization_id, id::text, uri, name, created_by, created_at`

// Insert stores r. It reports false, storing nothing, when the URI is
// registered already.
func Insert(ctx context.Context, db database.Querier, r Resource) (bool, error) {
	tag, err := db.Exec(ctx, `insert into resources (organization_id, id, uri, name, created_by, created_at)
		values ($1, $2, $3, $4, $5, $6) on conflict (uri) do nothing`,
		r.OrganizationID, r.ID, r.URI, r.Name, r.CreatedBy, r.CreatedAt)
	return err == nil && tag.RowsAffected() == 1, err
}

// List returns an organization's resources, oldest first.
func List(ctx context.Context, db database.Querier, organizationID string) ([]Resource, error) {
	rows, err := db.Query(ctx, `select `+columns+` from resources where organization_id = $1 order by created_at, id`, organizationID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Resource])
}

// ByURIs returns the resources registered with any of uris, in no order.
func ByURIs(ctx context.Context, db database.Querier, uris []string) ([]Resource, error) {
	rows, err := db.Query(ctx, `select `+columns+` from resources where uri = any($1)`, uris)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Resource])
}

// ByURI returns the resource registered with uri. database.ErrNotFound.
func ByURI(ctx context.Context, db database.Querier, uri string) (Resource, error) {
	rows, err := db.Query(ctx, `select `+columns+` from resources where uri = $1`, uri)
	if err != nil {
		return Resource{}, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Resource])
	if errors.Is(err, pgx.ErrNoRows) {
		return Resource{}, database.ErrNotFound
	}
	return r, err
}
