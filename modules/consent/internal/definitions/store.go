// Package definitions is the consent module's SQL for consent definitions
// and their versions.
package definitions

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
)

// Definition is a row of consent_definitions.
type Definition struct {
	OrganizationID string
	ID             string
	Default        bool
	LatestVersion  int
	CreatedAt      time.Time
	RetiredAt      *time.Time
}

// Category is a data category in both languages, as data_categories keeps it.
type Category struct {
	EN string `json:"en"`
	NB string `json:"nb"`
}

// Version is a row of consent_definition_versions.
type Version struct {
	OrganizationID string
	DefinitionID   string
	Version        int
	Tag            *string
	TitleEN        string
	TitleNB        string
	PurposeEN      string
	PurposeNB      string
	DataCategories []Category
	Recipient      string
	Validity       *string
	Retention      *string
	AssuranceLevel string
	TextSHA256     []byte
	PublishedBy    string
	PublishedAt    time.Time
	// WithdrawalConsequences is nil when the version says nothing of them.
	WithdrawalConsequences *Category
	Resources              []string
	Parameters             []Parameter
}

// Parameter is a declared parameter, as parameters keeps it.
type Parameter struct {
	Name  string   `json:"name"`
	Label Category `json:"label"`
}

const definitionColumns = `organization_id, id, is_default, latest_version, created_at, retired_at`

func scanDefinition(row pgx.Row) (Definition, error) {
	var d Definition
	err := row.Scan(&d.OrganizationID, &d.ID, &d.Default, &d.LatestVersion, &d.CreatedAt, &d.RetiredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Definition{}, database.ErrNotFound
	}
	return d, err
}

// HasDefault reports whether the organization has its default definition.
func HasDefault(ctx context.Context, db database.Querier, organizationID string) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `select exists (select 1 from consent_definitions where organization_id = $1 and is_default)`,
		organizationID).Scan(&ok)
	return ok, err
}

// Insert stores a new definition with its first version v. It reports false,
// storing nothing, when the organization already has a definition of that
// id (or, for a default, a default).
func Insert(ctx context.Context, db database.Querier, d Definition, v Version) (bool, error) {
	tag, err := db.Exec(ctx, `insert into consent_definitions (organization_id, id, is_default, latest_version)
		values ($1, $2, $3, 1) on conflict do nothing`, d.OrganizationID, d.ID, d.Default)
	if err != nil || tag.RowsAffected() == 0 {
		return false, err
	}
	return true, InsertVersion(ctx, db, v)
}

// InsertVersion stores v.
func InsertVersion(ctx context.Context, db database.Querier, v Version) error {
	_, err := db.Exec(ctx, `insert into consent_definition_versions (organization_id, definition_id, version, tag,
			title_en, title_nb, purpose_en, purpose_nb, data_categories, recipient, validity, assurance_level,
			text_sha256, published_by, published_at, withdrawal_consequences, retention, resources, parameters)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		v.OrganizationID, v.DefinitionID, v.Version, v.Tag, v.TitleEN, v.TitleNB, v.PurposeEN, v.PurposeNB,
		v.DataCategories, v.Recipient, v.Validity, v.AssuranceLevel, v.TextSHA256, v.PublishedBy, v.PublishedAt,
		v.WithdrawalConsequences, v.Retention, nonNil(v.Resources), nonNilParameters(v.Parameters))
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilParameters(p []Parameter) []Parameter {
	if p == nil {
		return []Parameter{}
	}
	return p
}

// Get returns a definition. With lock, its row is locked until the
// transaction ends against other publishes and retirement, but not against
// creates pinning it (Pin). database.ErrNotFound.
func Get(ctx context.Context, db database.Querier, organizationID, id string, lock bool) (Definition, error) {
	sql := `select ` + definitionColumns + ` from consent_definitions where organization_id = $1 and id = $2`
	if lock {
		sql += ` for no key update`
	}
	return scanDefinition(db.QueryRow(ctx, sql, organizationID, id))
}

// Pinned is the definition version a new flow runs.
type Pinned struct {
	Definition Definition
	Version    int // 0 when the definition has no such version
	Tag        *string
	// Parameters are the version's declared parameters.
	Parameters []Parameter
}

// Pin returns the definition a new flow runs, the organization's default
// when id is empty, with its version n (the latest when 0), and keeps it
// from being retired until the transaction ends: the key-share lock
// conflicts with Retire's update lock and with nothing a create or publish
// takes. database.ErrNotFound.
func Pin(ctx context.Context, db database.Querier, organizationID, id string, n int) (Pinned, error) {
	var p Pinned
	d := &p.Definition
	var version *int
	err := db.QueryRow(ctx, `select d.organization_id, d.id, d.is_default, d.latest_version, d.created_at, d.retired_at,
			v.version, v.tag, coalesce(v.parameters, '[]')
		from consent_definitions d
		left join consent_definition_versions v on v.organization_id = d.organization_id and v.definition_id = d.id
			and v.version = coalesce(nullif($3, 0), d.latest_version)
		where d.organization_id = $1 and (d.id = $2 or ($2 = '' and d.is_default))
		for key share of d`, organizationID, id, n).
		Scan(&d.OrganizationID, &d.ID, &d.Default, &d.LatestVersion, &d.CreatedAt, &d.RetiredAt, &version, &p.Tag, &p.Parameters)
	if errors.Is(err, pgx.ErrNoRows) {
		return Pinned{}, database.ErrNotFound
	}
	if version != nil {
		p.Version = *version
	}
	return p, err
}

// List returns the organization's definitions with their latest versions, by id.
func List(ctx context.Context, db database.Querier, organizationID string) ([]Definition, []Version, error) {
	rows, err := db.Query(ctx, `select d.organization_id, d.id, d.is_default, d.latest_version, d.created_at, d.retired_at,
			`+versionColumns("v")+`
		from consent_definitions d
		join consent_definition_versions v on v.organization_id = d.organization_id and v.definition_id = d.id
			and v.version = d.latest_version
		where d.organization_id = $1 order by d.id`, organizationID)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		defs []Definition
		vers []Version
	)
	for rows.Next() {
		var d Definition
		var v Version
		dest := append([]any{&d.OrganizationID, &d.ID, &d.Default, &d.LatestVersion, &d.CreatedAt, &d.RetiredAt}, v.dest()...)
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, err
		}
		defs, vers = append(defs, d), append(vers, v)
	}
	return defs, vers, rows.Err()
}

func versionColumns(alias string) string {
	p := alias + "."
	return p + "organization_id, " + p + "definition_id, " + p + "version, " + p + "tag, " + p + "title_en, " +
		p + "title_nb, " + p + "purpose_en, " + p + "purpose_nb, " + p + "data_categories, " + p + "recipient, " +
		p + "validity, " + p + "assurance_level, " + p + "text_sha256, " + p + "published_by, " + p + "published_at, " + p + "withdrawal_consequences, " + p + "retention, " + p + "resources, " + p + "parameters"
}

func (v *Version) dest() []any {
	return []any{&v.OrganizationID, &v.DefinitionID, &v.Version, &v.Tag, &v.TitleEN, &v.TitleNB, &v.PurposeEN,
		&v.PurposeNB, &v.DataCategories, &v.Recipient, &v.Validity, &v.AssuranceLevel, &v.TextSHA256,
		&v.PublishedBy, &v.PublishedAt, &v.WithdrawalConsequences, &v.Retention, &v.Resources, &v.Parameters}
}

// GetVersion returns version n of a definition. database.ErrNotFound.
func GetVersion(ctx context.Context, db database.Querier, organizationID, id string, n int) (Version, error) {
	var v Version
	err := db.QueryRow(ctx, `select `+versionColumns("v")+` from consent_definition_versions v
		where v.organization_id = $1 and v.definition_id = $2 and v.version = $3`, organizationID, id, n).Scan(v.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Version{}, database.ErrNotFound
	}
	return v, err
}

// Publish stores v as the definition's latest version; the caller holds the
// definition's row (Get with lock).
func Publish(ctx context.Context, db database.Querier, v Version) error {
	if err := InsertVersion(ctx, db, v); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `update consent_definitions set latest_version = $3 where organization_id = $1 and id = $2`,
		v.OrganizationID, v.DefinitionID, v.Version)
	return err
}

// Retire marks the definition retired, once. It waits for the creates
// that pinned it to end, so that none commits a flow on it afterwards.
// database.ErrNotFound. The first retirement's time stays: least ignores a null, and
// unlike coalesce it may hold now() on Citus.
func Retire(ctx context.Context, db database.Querier, organizationID, id string) (Definition, error) {
	if _, err := scanDefinition(db.QueryRow(ctx, `select `+definitionColumns+` from consent_definitions
		where organization_id = $1 and id = $2 for update`, organizationID, id)); err != nil {
		return Definition{}, err
	}
	return scanDefinition(db.QueryRow(ctx, `update consent_definitions set retired_at = least(retired_at, now())
		where organization_id = $1 and id = $2 returning `+definitionColumns, organizationID, id))
}
