package database

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/flowd/flowd/migrations"
)

// MigrateTo applies flowd's migrations up to version, and not River's: a
// test fills the schema as it was and then migrates the rest.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int32) error {
	return withMigrateLock(ctx, pool, func(conn *pgx.Conn) error {
		m, err := migrate.NewMigrator(ctx, conn, versionTable)
		if err != nil {
			return err
		}
		if err := m.LoadMigrations(migrations.FS); err != nil {
			return err
		}
		return m.MigrateTo(ctx, version)
	})
}

// KeyedByOrganization reports whether Citus can distribute table by organization_id.
func KeyedByOrganization(ctx context.Context, pool *pgxpool.Pool, table string) (bool, error) {
	var keyed bool
	err := withMigrateLock(ctx, pool, func(conn *pgx.Conn) (err error) {
		keyed, err = keyedByOrganization(ctx, conn, table)
		return err
	})
	return keyed, err
}

// UnclassifiedTables returns the tables no list of citus.go names.
func UnclassifiedTables(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var tables []string
	err := withMigrateLock(ctx, pool, func(conn *pgx.Conn) (err error) {
		tables, err = unclassifiedTables(ctx, conn)
		return err
	})
	return tables, err
}

// MigrateRiver applies River's migrations alone: a test queues jobs in a
// schema filled as it was before a migration of flowd's.
func MigrateRiver(ctx context.Context, pool *pgxpool.Pool) error {
	for _, schema := range RiverSchemas {
		// A schema a later migration makes is not there yet.
		if schema != "" {
			if _, err := pool.Exec(ctx, "create schema if not exists "+schema); err != nil {
				return err
			}
		}
		river, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
		if err != nil {
			return err
		}
		if _, err := river.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return err
		}
	}
	return nil
}
