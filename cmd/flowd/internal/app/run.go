// Package app wires flowd together: each command builds what it needs through
// explicit constructors and runs until its context ends.
package app

import (
	"context"
	"flag"
	"io"
	"slices"

	"github.com/flowd/flowd/cmd/flowd/internal/admin"
	"github.com/flowd/flowd/cmd/flowd/internal/command"
)

// Run is flowd's whole program; main only calls it, and end-to-end tests
// call it too, with their own arguments, environment and output. A command
// line it cannot read is a *command.UsageError.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	sys := command.Env{Getenv: getenv, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if len(args) > 0 && args[0] == "--version" {
		return runVersion(ctx, args[1:], sys)
	}
	root := command.Command{Name: "flowd", Summary: "consent flows for organizations", Subcommands: commands()}
	return root.Dispatch(ctx, nil, args, sys)
}

// commands is every command of flowd: the one table that both runs them and
// lists them in `flowd help`, so that the two cannot differ.
func commands() []command.Command {
	cmds := []command.Command{
		{Name: "serve", Synopsis: "[--addr ADDR]", Run: runServe,
			Summary: "serve the API, the console, the consent pages and the webhook workers",
			Detail: "It migrates the database first unless FLOWD_MIGRATE_ON_START=false. Several instances may share one\n" +
				"database. SIGTERM drains: /readyz fails for FLOWD_SHUTDOWN_DELAY while requests are still served."},
		{Name: "migrate", Synopsis: "[--citus]", Run: runMigrate,
			Summary: "apply the pending database migrations and exit",
			Detail: "Safe when several instances run it at once. --citus (or FLOWD_CITUS=true) then distributes\n" +
				"the tenant tables on a Citus coordinator."},
		{Name: "version", Synopsis: "[--json]", Run: runVersion,
			Summary: "print flowd's version, the commit it was built from and when it was built"},
	}
	cmds = append(cmds, admin.Commands()...)
	return append(cmds, command.Command{Name: "help", Synopsis: "[COMMAND [SUBCOMMAND]]", Run: runHelp,
		Summary: "print the usage of flowd or of one of its commands"})
}

// runHelp handles "flowd help [COMMAND [SUBCOMMAND]]": the usage of flowd,
// or of the command named, as `flowd COMMAND --help` prints it.
func runHelp(ctx context.Context, args []string, sys command.Env) error {
	if len(args) > 0 && command.IsHelpFlag(args[0]) {
		return command.Help(flag.NewFlagSet("help", flag.ContinueOnError))
	}
	return Run(ctx, append(slices.Clip(args), "--help"), sys.Getenv, sys.Stdin, sys.Stdout, sys.Stderr)
}
