package store

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/database"
)

// table is how the rows of a table, or the columns of it that a statement
// reads, map onto a struct T: each of T's fields names its column in a db
// tag, and rows are read into T by those names, as pgx.RowToStructByName
// reads them. A statement that reads T selects t.columns; a statement that
// writes a row takes its columns and values from the fields whose write
// tag names the statement. A field whose select tag holds an expression
// is read as that expression, named by its db tag: a column another table
// gives the row.
//
// pgx.RowToStructByName matches the columns to T's fields again for each
// row, which costs a list page of ten rows more CPU than the rest of its
// reading; a table matches them once per result.
type table[T any] struct {
	names   []string // each field's column, in field order
	columns string   // names joined: the select list of T
}

func newTable[T any]() *table[T] {
	typ := reflect.TypeFor[T]()
	t := &table[T]{names: make([]string, typ.NumField())}
	selects := make([]string, len(t.names))
	for i := range t.names {
		f := typ.Field(i)
		t.names[i] = f.Tag.Get("db")
		if t.names[i] == "" || t.names[i] == "-" {
			panic(fmt.Sprintf("store: field %s of %s names no column", f.Name, typ))
		}
		selects[i] = t.names[i]
		if expr := f.Tag.Get("select"); expr != "" {
			selects[i] = expr + " as " + t.names[i]
		}
	}
	t.columns = strings.Join(selects, ", ")
	return t
}

// one reads the one row of rows into a T. database.ErrNotFound.
func (t *table[T]) one(rows pgx.Rows, err error) (T, error) {
	var row T
	err = t.read(&row, true, rows, err)
	return row, err
}

// fill reads the one row of rows into the fields of row that its columns
// name, and leaves the others as they are: a write reads back so what the
// database set. database.ErrNotFound.
func (t *table[T]) fill(row *T, rows pgx.Rows, err error) error {
	return t.read(row, false, rows, err)
}

// read reads the one row of rows into row: into every field when whole is
// set, and otherwise into those its columns name. database.ErrNotFound.
func (t *table[T]) read(row *T, whole bool, rows pgx.Rows, err error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return database.ErrNotFound
	}
	dest, err := t.targets(row, rows.FieldDescriptions(), whole)
	if err != nil {
		return err
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// all reads every row of rows into a T.
func (t *table[T]) all(rows pgx.Rows, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	return t.appendAll(nil, rows)
}

// appendAll appends every row of rows, read into a T, to out.
func (t *table[T]) appendAll(out []T, rows pgx.Rows) ([]T, error) {
	defer rows.Close()
	var (
		row  T
		dest []any
	)
	for rows.Next() {
		if dest == nil {
			var err error
			if dest, err = t.targets(&row, rows.FieldDescriptions(), true); err != nil {
				return nil, err
			}
		}
		// Each Scan writes every field anew: a pointer or slice it leaves
		// in row is a new one, which the rows appended before do not share.
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// targets are the fields of row that cols name, in the order of cols. A
// column of no field, or one named twice, is an error, and so is a field
// of no column when the whole row is to be read, as pgx.RowToStructByName
// makes them.
func (t *table[T]) targets(row *T, cols []pgconn.FieldDescription, whole bool) ([]any, error) {
	if whole && len(cols) != len(t.names) {
		return nil, fmt.Errorf("store: %d columns for the %d fields of %T", len(cols), len(t.names), *row)
	}
	v := reflect.ValueOf(row).Elem()
	dest := make([]any, len(cols))
	for i, c := range cols {
		if i < len(t.names) && t.names[i] == c.Name {
			dest[i] = v.Field(i).Addr().Interface()
			continue
		}
		// Out of the fields' order, a column may also be one read before.
		field := slices.Index(t.names, c.Name)
		if field < 0 {
			return nil, fmt.Errorf("store: no field of %T reads column %s", *row, c.Name)
		}
		if dest[i] = v.Field(field).Addr().Interface(); slices.Contains(dest[:i], dest[i]) {
			return nil, fmt.Errorf("store: column %s of %T read twice", c.Name, *row)
		}
	}
	return dest, nil
}

// writes are the columns of T whose write tag names statement, and the
// index of each one's field; "" names the columns of no write tag, which
// the database sets.
func (t *table[T]) writes(statement string) []column {
	typ := reflect.TypeFor[T]()
	var cols []column
	for i, name := range t.names {
		if slices.Contains(strings.Split(typ.Field(i).Tag.Get("write"), ","), statement) {
			cols = append(cols, column{name, i})
		}
	}
	return cols
}

// column is a column a statement writes, and the index of its field.
type column struct {
	name  string
	field int
}

// values appends the values of row's fields that cols name to args.
func (t *table[T]) values(args []any, row *T, cols []column) []any {
	v := reflect.ValueOf(row).Elem()
	for _, c := range cols {
		args = append(args, v.Field(c.field).Interface())
	}
	return args
}

// columnList is "a, b, …", the names of cols.
func columnList(cols []column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// placeholders is "$from, …" for n parameters.
func placeholders(from, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "$" + strconv.Itoa(from+i)
	}
	return strings.Join(p, ", ")
}

// assignments is "a = $from, …" for cols.
func assignments(from int, cols []column) string {
	a := make([]string, len(cols))
	for i, c := range cols {
		a[i] = c.name + " = $" + strconv.Itoa(from+i)
	}
	return strings.Join(a, ", ")
}
