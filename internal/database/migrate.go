package database

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/flowd/flowd/migrations"
)

// versionTable records the applied migrations of migrations/.
const versionTable = "schema_version"

// migrateLock serializes migrations of several instances starting at once.
// tern takes a lock of its own, but River's migrations must run under the same one.
const migrateLock = 7_230_164_001

// RiverSchemas are the schemas of River's tables, one for each River client:
// the webhooks module's queue in the default schema (""), the flows module's
// (consent expiry) in FlowsRiverSchema, the ssf module's (push delivery of
// Security Event Tokens) in SSFRiverSchema. River elects one leader per schema,
// and a leader schedules, rescues and enqueues the periodic jobs of only the
// kinds its own client knows, so clients that know different kinds must not
// share a schema.
var RiverSchemas = []string{"", FlowsRiverSchema, SSFRiverSchema}

// FlowsRiverSchema holds the flows module's River tables (migration 014 creates it).
const FlowsRiverSchema = "flows_river"

// SSFRiverSchema holds the ssf module's River tables (migration 042 creates it).
const SSFRiverSchema = "ssf_river"

// Migrate applies flowd's migrations and River's (the job queues, see
// RiverSchemas) under one advisory lock; running it again, or from two
// instances at once, is a no-op.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return withMigrateLock(ctx, pool, func(conn *pgx.Conn) error {
		m, err := migrate.NewMigrator(ctx, conn, versionTable)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if err := m.LoadMigrations(migrations.FS); err != nil {
			return fmt.Errorf("migrate: load: %w", err)
		}
		current, err := m.GetCurrentVersion(ctx)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		// A newer flowd has migrated past this one, as in a rolling upgrade:
		// there is nothing to apply (tern would try to go down), and the
		// schema stays one this build runs on, migrations being additive.
		if int(current) < len(m.Migrations) {
			if err := m.Migrate(ctx); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		for _, schema := range RiverSchemas {
			river, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
			if err != nil {
				return fmt.Errorf("migrate river: %w", err)
			}
			if current, err := riverCurrent(ctx, pool, river, schema); err != nil || current {
				if err != nil {
					return fmt.Errorf("migrate river %q: %w", schema, err)
				}
				continue
			}
			// River's migrations each take a transaction of their own (one adds an enum
			// value that the next uses); our lock still keeps instances apart.
			if _, err := river.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
				return fmt.Errorf("migrate river %q: %w", schema, err)
			}
		}
		return nil
	})
}

// withMigrateLock runs fn on a connection that holds the migrations'
// advisory lock, so that instances starting at once take turns.
func withMigrateLock(ctx context.Context, pool *pgxpool.Pool, fn func(conn *pgx.Conn) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "select pg_advisory_lock($1)", migrateLock); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "select pg_advisory_unlock($1)", migrateLock) //nolint:errcheck
	return fn(conn.Conn())
}

// MigrationsCurrent reports whether every migration of flowd and River is
// applied. A schema a newer flowd migrated further counts as current: during
// a rolling upgrade the earlier instances stay ready beside the new ones.
func MigrationsCurrent(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var applied int32
	err := pool.QueryRow(ctx, "select coalesce((select version from "+versionTable+" limit 1), 0)").Scan(&applied)
	if err != nil {
		return false, err
	}
	want, err := migrate.FindMigrations(migrations.FS)
	if err != nil {
		return false, err
	}
	if int(applied) < len(want) {
		return false, nil
	}
	for _, schema := range RiverSchemas {
		river, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
		if err != nil {
			return false, err
		}
		if current, err := riverCurrent(ctx, pool, river, schema); err != nil || !current {
			return false, err
		}
	}
	return true, nil
}

// riverCurrent reports whether River's latest migration is applied in
// schema, from its river_migration table alone. River's own check reads
// information_schema, whose planning costs more than the rest of a start or
// of an admin command; this one runs on each of both. A table River has not
// made yet, or one from before River kept migration lines, is not current.
func riverCurrent(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, river *rivermigrate.Migrator[pgx.Tx], schema string) (bool, error) {
	all := river.AllVersions()
	table := pgx.Identifier{"river_migration"}
	if schema != "" {
		table = pgx.Identifier{schema, "river_migration"}
	}
	var applied int
	err := db.QueryRow(ctx, "select coalesce(max(version), 0) from "+table.Sanitize()+" where line = 'main'").Scan(&applied)
	var pgErr *pgconn.PgError
	// 42P01, 42703: no such table, no such column.
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703") {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return len(all) > 0 && applied >= all[len(all)-1].Version, nil
}
