package app

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
)

// runMigrate handles "flowd migrate": apply every pending migration and exit.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	cfg, err := config.Load(getenv, config.Need{Database: true})
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
	fmt.Fprintln(stdout, "migrations are current")
	return nil
}
