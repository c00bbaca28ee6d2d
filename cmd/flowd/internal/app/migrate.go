package app

import (
	"context"
	"flag"
	"fmt"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/cmd/flowd/internal/wiring"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
)

// runMigrate handles "flowd migrate [--citus]": apply every pending
// migration and, on Citus, distribute the tenant tables; then exit.
func runMigrate(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	citus := fs.Bool("citus", false, "distribute the tenant tables on a Citus coordinator (default FLOWD_CITUS)")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(sys.Getenv, config.Need{Database: true})
	if err != nil {
		return err
	}
	pool, err := database.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := database.Migrate(ctx, pool); err != nil {
		return err
	}
	fmt.Fprintln(sys.Stdout, "migrations are current")
	if !*citus && !cfg.Citus {
		return nil
	}
	if err := database.Distribute(ctx, pool, wiring.NewLogger(sys.Stderr, cfg.LogLevel)); err != nil {
		return err
	}
	fmt.Fprintln(sys.Stdout, "tenant tables are distributed by organization_id")
	return nil
}
