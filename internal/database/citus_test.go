package database_test

import (
	"context"
	"testing"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/dbtest"
)

// TestDistributedNamesTheTablesCitusDistributes: on Citus the tenant
// tables are distributed and the coordinator's are not; on one PostgreSQL
// none is.
func TestDistributedNamesTheTablesCitusDistributes(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	for table, want := range map[string]bool{"flows": dbtest.Citus(), "organizations": false, "no_such_table": false} {
		got, err := database.Distributed(context.Background(), pool, table)
		if err != nil || got != want {
			t.Errorf("Distributed(%s) = %v, %v; want %v", table, got, err, want)
		}
	}
}
