package database

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// On Citus (flowd migrate --citus, FLOWD_CITUS=true) the tenant tables are
// distributed by organization_id and co-located with flows, so that the
// statements of a request, which all name its organization, run on the one
// node that holds the organization's rows, with full SQL and transactions.
// Everything else stays a local table on the coordinator: flowd reads it
// only there and never joins it with a tenant table (a module does not read
// another's tables), so a reference table's copy on every node would buy
// nothing and make each write a commit on every node. docs/citus.md says
// why for each.

// TenantTables are distributed by organization_id, co-located with flows,
// in this order: a table comes after the tables its foreign keys reference.
// A table whose keys do not include organization_id yet is left local, with
// a warning. A new tenant table is one more line.
var TenantTables = []string{
	"flows",
	"flow_tasks",
	"flow_incidents",
	"flow_attachments",
	"flow_uses",
	"flow_idempotency_keys", // unused since 043; kept for the previous version
	"flow_deletions",
	"subject_keys",
	"consent_requests",
	"consent_definitions",
	"consent_definition_versions",
	"receipt_subject_salts",
	"audit_log",
	"events",
	"webhook_endpoints",
	"webhook_secrets",
	"webhook_signing_keys",
	"webhook_events",
	"webhook_attempts",
	"webhook_recoveries",
	"api_idempotency_keys",
	"erasures",
	"erasure_kept_receipts",
	"erasure_requests",
	"ssf_streams",
	"ssf_removed_subjects",
	"ssf_sets",
}

// CoordinatorTables stay local tables on the coordinator, as do River's
// job queues (every table named river_*, in each of RiverSchemas) and
// schema_version.
var CoordinatorTables = []string{
	"organizations",
	"api_clients",
	"refresh_tokens",
	"revoked_access_tokens",
	"client_assertion_jtis",
	"dpop_proofs",
	"signing_keys",
	"external_clients",
	"staff_accounts",
	"login_requests",
	"login_codes",
	"login_access_tokens",
	"login_attempts",
	"login_sessions",
	"api_rate_windows",
	// Resources are found by their URI across organizations.
	"resources",
}

// distributionColumn is the column every tenant table is distributed by.
const distributionColumn = "organization_id"

// Distribute makes a migrated database on a Citus coordinator distribute
// the tenant tables (TenantTables), under the migrations' lock. Running it
// again changes nothing. It fails when the citus extension is not installed.
func Distribute(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	return withMigrateLock(ctx, pool, func(conn *pgx.Conn) error {
		if err := distribute(ctx, conn, log); err != nil {
			return fmt.Errorf("citus: %w", err)
		}
		return nil
	})
}

func distribute(ctx context.Context, conn *pgx.Conn, log *slog.Logger) error {
	var installed bool
	if err := conn.QueryRow(ctx, `select exists (select from pg_extension where extname = 'citus')`).Scan(&installed); err != nil {
		return err
	}
	if !installed {
		return errors.New("the citus extension is not installed in this database: see docs/operations.md, \"Running on Citus\"")
	}
	unknown, err := unclassifiedTables(ctx, conn)
	if err != nil {
		return err
	}
	for _, t := range unknown {
		log.WarnContext(ctx, "citus: a table flowd does not list stays local on the coordinator", "table", t)
	}
	todo, err := tablesToDistribute(ctx, conn, log)
	if err != nil || len(todo) == 0 {
		return err
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// A local table may not reference a distributed one, nor the other
		// way round: the keys between the tables go, and come back once
		// all of them are distributed.
		keys, err := foreignKeys(ctx, tx, todo)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if _, err := tx.Exec(ctx, "alter table "+k.table+" drop constraint "+k.name); err != nil {
				return err
			}
		}
		for _, t := range todo {
			colocate := TenantTables[0]
			if t == colocate {
				colocate = "none"
			}
			if _, err := tx.Exec(ctx, `select create_distributed_table($1, $2, colocate_with => $3)`,
				t, distributionColumn, colocate); err != nil {
				return fmt.Errorf("distribute %s: %w", t, err)
			}
		}
		for _, k := range keys {
			if _, err := tx.Exec(ctx, "alter table "+k.table+" add constraint "+k.name+" "+k.definition); err != nil {
				return err
			}
		}
		// The rows were copied to the shards; their local copies only take room.
		for _, t := range todo {
			if _, err := tx.Exec(ctx, `select truncate_local_data_after_distributing_table($1)`, t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, t := range todo {
		log.InfoContext(ctx, "citus: distributed by organization_id", "table", t)
	}
	return nil
}

// tablesToDistribute returns the tenant tables not yet distributed whose
// keys include the distribution column, logging those whose keys do not.
func tablesToDistribute(ctx context.Context, conn *pgx.Conn, log *slog.Logger) ([]string, error) {
	rows, err := conn.Query(ctx, `select logicalrelid::text, column_to_column_name(logicalrelid, partkey)
		from pg_dist_partition`)
	if err != nil {
		return nil, err
	}
	distributed := map[string]string{}
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			return nil, err
		}
		distributed[table] = column
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var todo []string
	for _, t := range TenantTables {
		if column, ok := distributed[t]; ok {
			if column != distributionColumn {
				return nil, fmt.Errorf("%s is distributed by %s, not %s", t, column, distributionColumn)
			}
			continue
		}
		keyed, err := keyedByOrganization(ctx, conn, t)
		if err != nil {
			return nil, err
		}
		if !keyed {
			log.WarnContext(ctx, "citus: a tenant table stays local on the coordinator: its keys do not include organization_id", "table", t)
			continue
		}
		todo = append(todo, t)
	}
	return todo, nil
}

// keyedByOrganization reports whether table has the distribution column
// and every unique index of it (its primary key too) includes it, which
// Citus requires of a distributed table.
func keyedByOrganization(ctx context.Context, conn *pgx.Conn, table string) (bool, error) {
	var keyed bool
	err := conn.QueryRow(ctx, `select exists (select from pg_attribute
			where attrelid = $1::regclass and attname = $2 and not attisdropped)
		and not exists (select from pg_index i where i.indrelid = $1::regclass and i.indisunique
			and not exists (select from pg_attribute a
				where a.attrelid = i.indrelid and a.attnum = any(i.indkey) and a.attname = $2))`,
		table, distributionColumn).Scan(&keyed)
	return keyed, err
}

// foreignKey is a foreign key constraint, its names quoted for SQL.
type foreignKey struct{ table, name, definition string }

// foreignKeys returns the foreign keys from or to tables.
func foreignKeys(ctx context.Context, tx pgx.Tx, tables []string) ([]foreignKey, error) {
	rows, err := tx.Query(ctx, `select conrelid::regclass::text, quote_ident(conname), pg_get_constraintdef(oid)
		from pg_constraint where contype = 'f'
		and (conrelid = any($1::text[]::regclass[]) or confrelid = any($1::text[]::regclass[]))
		order by conrelid::regclass::text, conname`, tables)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (foreignKey, error) {
		var k foreignKey
		return k, r.Scan(&k.table, &k.name, &k.definition)
	})
}

// unclassifiedTables returns the tables of the public schema that no list
// here names: a migration made them and nobody decided where they belong.
func unclassifiedTables(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `select c.relname from pg_class c
		where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p')
		and c.relname <> $1 and c.relname not like 'river\_%'
		order by c.relname`, versionTable)
	if err != nil {
		return nil, err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	listed := slices.Concat(TenantTables, CoordinatorTables)
	return slices.DeleteFunc(tables, func(t string) bool { return slices.Contains(listed, t) }), nil
}
