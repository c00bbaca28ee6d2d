// Package app wires flowd together: each command builds what it needs through
// explicit constructors and runs until its context ends.
package app

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/flowd/flowd/internal/telemetry"
)

// Run is flowd's whole program; main only calls it, and end-to-end tests
// call it too, with their own arguments, environment and output. A command
// line it cannot read is a *UsageError.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := command{name: "flowd", summary: "consent flows for organizations", subcommands: commands()}
	return root.dispatch(ctx, nil, args, getenv, stdin, stdout, stderr)
}

// commands is every command of flowd: the one table that both runs them and
// lists them in `flowd help`, so that the two cannot differ.
func commands() []command {
	return []command{
		{name: "serve", synopsis: "[--addr ADDR]", run: runServe,
			summary: "serve the API, the console, the consent pages and the webhook workers",
			detail: "It migrates the database first unless FLOWD_MIGRATE_ON_START=false. Several instances may share one\n" +
				"database. SIGTERM drains: /readyz fails for FLOWD_SHUTDOWN_DELAY while requests are still served."},
		{name: "migrate", synopsis: "[--citus]", run: runMigrate,
			summary: "apply the pending database migrations and exit",
			detail: "Safe when several instances run it at once. --citus (or FLOWD_CITUS=true) then distributes\n" +
				"the tenant tables on a Citus coordinator."},
		{name: "version", synopsis: "[--json]", run: runVersion,
			summary: "print flowd's version, the commit it was built from and when it was built"},
		{name: "orgs", summary: "organizations", subcommands: []command{
			{name: "create", synopsis: `--name NAME [--org-number N] [--prefix P] [--redirect-origins "URL ..."] [--json]`,
				run: runOrgsCreate, summary: "create an organization and its first webhook signing secret"},
			{name: "list", synopsis: "[--json]", run: runOrgsList, summary: "list the organizations"},
			{name: "rotate-webhook-secret", synopsis: "--org ORG_ID [--json]", run: runRotateWebhookSecret,
				summary: "make a new webhook signing secret (the old one signs for 24 h more)"},
		}},
		{name: "staff", summary: "the console's staff accounts",
			detail: "A disable, a password reset, a role change, a deletion and end-sessions end every session of\n" +
				"the account at once, at the console and at the sign-in service; each is in the organization's\n" +
				"audit log.",
			subcommands: []command{
				{name: "create", synopsis: "--org ORG_ID --username U --role admin|viewer [--name N] --password-stdin [--json]",
					run: runStaffCreate, summary: "create a console staff account (the password read from stdin)"},
				{name: "disable", synopsis: "--username U [--json]", run: runStaffDisable,
					summary: "stop a staff account from signing in"},
				{name: "reset-password", synopsis: "--username U --password-stdin [--json]", run: runStaffResetPassword,
					summary: "set a staff account's password; also lifts a sign-in pause after failed attempts"},
				{name: "set-role", synopsis: "--username U --role admin|viewer [--json]", run: runStaffSetRole,
					summary: "give a staff account another role"},
				{name: "delete", synopsis: "--username U [--json]", run: runStaffDelete, summary: "delete a staff account"},
				{name: "sessions", synopsis: "--username U [--json]", run: runStaffSessions,
					summary: "list a staff account's live sessions"},
				{name: "end-sessions", synopsis: "--username U [--json]", run: runStaffEndSessions,
					summary: "end every session of a staff account"},
			}},
		{name: "clients", summary: "API clients", subcommands: []command{
			{name: "create", synopsis: `--org ORG_ID [--name N] [--scopes "flows:read flows:write"] [--sandbox] [--dpop] [--jwks FILE|- | --jwks-uri URL [--secret]] [--json]`,
				run: runClientsCreate, summary: "create an API client; its secret is printed once",
				detail: "With --jwks or --jwks-uri the client authenticates with private_key_jwt and has no secret\n" +
					"unless --secret."},
			{name: "list", synopsis: "--org ORG_ID [--json]", run: runClientsList,
				summary: "list an organization's clients, mapped clients of external issuers included"},
			{name: "rotate", synopsis: "CLIENT_ID [--json]", run: runClientsRotate,
				summary: "give a client a new secret, printed once; the old one stops working at once"},
			{name: "revoke", synopsis: "CLIENT_ID [--json]", run: runClientsRevoke,
				summary: "revoke a client: it gets no more tokens, and its tokens stop working at once"},
			{name: "keys", synopsis: "CLIENT_ID --jwks FILE|- | --jwks-uri URL [--json]", run: runClientsKeys,
				summary: "replace a client's public keys (private_key_jwt)"},
			{name: "map", synopsis: "--org ORG_ID --issuer URL --client-id ID [--scopes S] [--sandbox] [--json]", run: runClientsMap,
				summary: "accept an external issuer's client as one of the organization's"},
			{name: "dpop", synopsis: "CLIENT_ID on|off [--json]", run: runClientDPoP,
				summary: "require DPoP-bound tokens (RFC 9449) of a client, or stop requiring them"},
			{name: "rate-limit", synopsis: "CLIENT_ID [--per-minute N|default] [--issuer URL] [--json]", run: runClientRateLimit,
				summary: "show a client's API rate limit, or set its own (N a minute, 0 none) or the default"},
		}},
		{name: "keys", summary: "signing and data keys", subcommands: []command{
			{name: "rotate", synopsis: "[--json]", run: runKeysRotate,
				summary: "make new token-signing keys (ES256 and RS256) and a new receipt key"},
			{name: "rotate-data-key", synopsis: "[--batch N] [--json]", run: runRotateDataKey,
				summary: "re-seal personal data under FLOWD_DATA_KEY (old keys in FLOWD_DATA_KEY_PREVIOUS)"},
		}},
		{name: "definitions", summary: "an organization's consent definitions, printed with --json as the API shows them",
			subcommands: []command{
				{name: "list", synopsis: "--org ORG_ID [--json]", run: runDefinitionsList,
					summary: "list the organization's consent definitions"},
				{name: "show", synopsis: "ID --org ORG_ID [--version N] [--json]", run: runDefinitionsShow,
					summary: "show a consent definition's version (the latest by default)"},
				{name: "publish", synopsis: "--org ORG_ID --file FILE|- [--id ID] [--json]", run: runDefinitionsPublish,
					summary: "publish a consent definition's next version (version 1 of a new one)"},
				{name: "retire", synopsis: "ID --org ORG_ID [--json]", run: runDefinitionsRetire,
					summary: "retire a consent definition: no new flow uses it"},
			}},
		{name: "flows", summary: "flows", subcommands: []command{
			{name: "reindex", synopsis: "[--batch N] [--json]", run: runFlowsReindex,
				summary: "fill in the blind index the person's own page finds flows by, printing progress"},
		}},
		{name: "receipts", summary: "consent receipts", subcommands: []command{
			{name: "verify", synopsis: "FILE [--jwks URL|FILE] [--json]", run: runReceiptsVerify,
				summary: "check a consent receipt (- reads stdin), offline with --jwks"},
		}},
		{name: "demo", synopsis: "--state FILE", run: runDemo,
			summary: "create (once) and print a demo organization, API client and staff admin, as make run does"},
		{name: "help", synopsis: "[COMMAND [SUBCOMMAND]]", run: runHelp,
			summary: "print the usage of flowd or of one of its commands"},
	}
}

// newLogger returns the JSON logger every command writes to stderr.
func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(strings.ToUpper(level)))
	return slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})))
}
