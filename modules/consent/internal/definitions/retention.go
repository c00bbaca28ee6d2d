package definitions

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Retention is a definition version's retention.
type Retention struct {
	OrganizationID string `db:"organization_id"`
	DefinitionID   string `db:"definition_id"`
	Version        int    `db:"version"`
	Retention      string `db:"retention"`
}

// Retentions returns every definition version of every organization that
// has a retention.
func Retentions(ctx context.Context, db database.Querier) ([]Retention, error) {
	rows, err := db.Query(ctx, `select organization_id, definition_id, version, retention from consent_definition_versions
		where retention is not null order by organization_id, definition_id, version`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Retention])
}
