// Package app wires flowd together: each command builds what it needs through
// explicit constructors and runs until its context ends.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

const usage = `flowd — consent flows for organizations

Usage:
  flowd serve      serve the API, console, consent pages and webhook workers
  flowd migrate [--citus]
                   apply database migrations and exit; --citus (or FLOWD_CITUS=true) then
                   distributes the tenant tables on a Citus coordinator
  flowd orgs rotate-webhook-secret --org ORG_ID [--json]
                   make a new webhook signing secret (the old one signs for 24 h more)
  flowd staff create --org ORG_ID --username U --role admin|viewer --password-stdin [--json]
                   create a console staff account (password read from stdin)
  flowd staff disable --username U            stop a staff account from signing in
  flowd staff reset-password --username U --password-stdin
                   set a staff account's password
  flowd staff set-role --username U --role admin|viewer
  flowd staff delete --username U
  flowd staff sessions --username U           list a staff account's live sessions
  flowd staff end-sessions --username U       end every session of a staff account
  flowd orgs create --name NAME [--org-number N] [--prefix P] [--redirect-origins "URL ..."] [--json]
  flowd orgs list [--json]
  flowd clients create --org ORG_ID [--name N] [--scopes "flows:read flows:write"] [--sandbox] [--dpop]
                   [--jwks FILE|- | --jwks-uri URL [--secret]] [--json]
                   with keys, a private_key_jwt client (no secret unless --secret)
  flowd clients list --org ORG_ID [--json]
  flowd clients rotate|revoke CLIENT_ID [--json]
  flowd clients keys CLIENT_ID --jwks FILE|- | --jwks-uri URL [--json]
                   replace a client's public keys (private_key_jwt)
  flowd clients map --org ORG_ID --issuer URL --client-id ID [--scopes S] [--sandbox] [--json]
  flowd clients dpop CLIENT_ID on|off [--json]
                   require DPoP-bound tokens (RFC 9449) of a client, or stop requiring them
  flowd clients rate-limit CLIENT_ID [--per-minute N|default] [--issuer URL] [--json]
                   show a client's API rate limit, or set its own (N a minute, 0 none) or the default
  flowd keys rotate [--json]   make new token-signing keys (ES256 and RS256)
  flowd keys rotate-data-key [--batch N] [--json]
                   re-seal personal data under FLOWD_DATA_KEY (old keys in FLOWD_DATA_KEY_PREVIOUS)
  flowd definitions list --org ORG_ID [--json]
  flowd definitions show ID --org ORG_ID [--version N] [--json]
  flowd definitions publish --org ORG_ID --file FILE|- [--id ID] [--json]
                   publish a consent definition's next version (version 1 of a new one)
  flowd definitions retire ID --org ORG_ID [--json]
  flowd receipts verify FILE [--jwks URL|FILE] [--json]   check a consent receipt (- reads stdin)
  flowd demo --state FILE   create (once) and print a demo organization, API client and staff admin

Settings come from the environment (DATABASE_URL, FLOWD_*); see README.md.
`

// Run is flowd's whole program; main only calls it, and end-to-end tests
// call it too, with their own arguments, environment and output.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, getenv, stdout, stderr)
	case "orgs":
		if len(rest) > 0 && rest[0] == "rotate-webhook-secret" {
			return runRotateWebhookSecret(ctx, rest[1:], getenv, stdout, stderr)
		}
		return runOrgs(ctx, rest, getenv, stdout, stderr)
	case "staff":
		return runStaff(ctx, rest, getenv, stdin, stdout, stderr)
	case "clients":
		return runClients(ctx, rest, getenv, stdin, stdout, stderr)
	case "keys":
		return runKeys(ctx, rest, getenv, stdout, stderr)
	case "definitions":
		return runDefinitions(ctx, rest, getenv, stdin, stdout, stderr)
	case "receipts":
		return runReceipts(ctx, rest, getenv, stdin, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// newLogger returns the JSON logger every command writes to stderr.
func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(strings.ToUpper(level)))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// parseFlags parses a subcommand's flags, writing usage to stderr on error.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
