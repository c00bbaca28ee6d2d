package store

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// A batch of the admin commands (rekey, reindex) writes its rows with one
// statement per organization, which takes the batch's values as arrays and
// joins them to the table: Citus routes a statement that names one
// organization to that organization's node, and plans it as PostgreSQL
// does, while a statement per row costs a round trip through the
// coordinator each.

// byOrganization splits items into one run per organization, each in the
// order of items, the runs in the order their organizations first appear.
func byOrganization[T any](items []T, organization func(T) string) [][]T {
	at := map[string]int{}
	var runs [][]T
	for _, it := range items {
		o := organization(it)
		i, ok := at[o]
		if !ok {
			i = len(runs)
			at[o] = i
			runs = append(runs, nil)
		}
		runs[i] = append(runs[i], it)
	}
	return runs
}

// sendByOrganization sends sql once for each organization's run of items,
// with the organization as $1 and args(run) after it, in one round trip.
func sendByOrganization[T any](ctx context.Context, db DB, items []T, organization func(T) string, sql string,
	args func(run []T) []any) error {
	if len(items) == 0 {
		return nil
	}
	var b pgx.Batch
	for _, run := range byOrganization(items, organization) {
		b.Queue(sql, append([]any{organization(run[0])}, args(run)...)...)
	}
	return db.SendBatch(ctx, &b).Close()
}

// arrayOf is one field of each of items, as an array argument.
func arrayOf[T, V any](items []T, field func(T) V) []V {
	out := make([]V, len(items))
	for i, it := range items {
		out[i] = field(it)
	}
	return out
}

// IndexCursor is where a batch command stands: the last row it looked at,
// in the primary key's order.
type IndexCursor struct{ OrganizationID, ID string }

// afterCursor reads up to limit rows of t from table after cursor, in the
// primary key's order, that match where (with args as $1 on): first those
// of the cursor's organization, in a statement Citus routes to that
// organization's node, and when they run out, those of the organizations
// after it, in a statement over every node. A statement over every node
// for every batch would read a batch from each node and keep one.
func afterCursor[T any](ctx context.Context, db DB, t *table[T], table, where string, args []any, after IndexCursor,
	limit int) ([]T, error) {
	org, id := "$"+strconv.Itoa(len(args)+1), "$"+strconv.Itoa(len(args)+2)
	var out []T
	if after.OrganizationID != "" {
		rows, err := t.all(db.Query(ctx, `select `+t.columns+` from `+table+`
			where organization_id = `+org+` and id > `+id+`::uuid and `+where+` order by id limit `+strconv.Itoa(limit),
			append(args, after.OrganizationID, after.ID)...))
		if err != nil || len(rows) == limit {
			return rows, err
		}
		out = rows
	}
	rows, err := t.all(db.Query(ctx, `select `+t.columns+` from `+table+`
		where organization_id > `+org+` and `+where+` order by organization_id, id limit `+strconv.Itoa(limit-len(out)),
		append(args, after.OrganizationID)...))
	return append(out, rows...), err
}
