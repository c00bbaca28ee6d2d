// Command flowd is the consent-flow service: one binary that serves the API,
// the console and the consent pages, runs the webhook workers, migrates the
// database and administers organizations, clients and staff.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flowd/flowd/cmd/flowd/internal/app"
	"github.com/flowd/flowd/cmd/flowd/internal/command"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "flowd:", err)
		os.Exit(command.ExitCode(err))
	}
}
