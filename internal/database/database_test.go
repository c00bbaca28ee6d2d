package database_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flowd/flowd/internal/database"
)

// TestIsUniqueViolation: a violation of a constraint is told apart from
// others', also on a Citus shard, whose copy of the constraint carries the
// shard's id, and whose error reaches the coordinator with the name in its
// message alone.
func TestIsUniqueViolation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err        error
		constraint string
		want       bool
	}{
		{&pgconn.PgError{Code: "23505", ConstraintName: "things_key"}, "things_key", true},
		{&pgconn.PgError{Code: "23505", ConstraintName: "things_key_102075"}, "things_key", true},
		{fmt.Errorf("insert: %w", &pgconn.PgError{Code: "23505", ConstraintName: "things_key"}), "things_key", true},
		{&pgconn.PgError{Code: "23505", Message: `duplicate key value violates unique constraint "things_key_102075"`}, "things_key", true},
		{&pgconn.PgError{Code: "23505", Message: `duplicate key value violates unique constraint "other_key_102075"`}, "things_key", false},
		{&pgconn.PgError{Code: "23505", ConstraintName: "things_key"}, "", true},
		{&pgconn.PgError{Code: "23505", ConstraintName: "things_key_other"}, "things_key", false},
		{&pgconn.PgError{Code: "23505", ConstraintName: "things_key_"}, "things_key", false},
		{&pgconn.PgError{Code: "23505", ConstraintName: "other_things_key"}, "things_key", false},
		{&pgconn.PgError{Code: "23503", ConstraintName: "things_key"}, "things_key", false},
		{fmt.Errorf("no database error"), "", false},
	} {
		if got := database.IsUniqueViolation(c.err, c.constraint); got != c.want {
			t.Errorf("IsUniqueViolation(%v, %q) = %v, want %v", c.err, c.constraint, got, c.want)
		}
	}
}

// TestIsUnavailable: a connection that closed while a statement was on its
// way is the database going away, although pgx no longer calls the error safe
// to retry (the statement may have run); a bad query is not.
func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("insert: %w", pgconn.ErrConnClosed), true},
		{&pgconn.ConnectError{}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "23505"}, false},
		{fmt.Errorf("no database error"), false},
		{nil, false},
	} {
		if got := database.IsUnavailable(c.err); got != c.want {
			t.Errorf("IsUnavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
