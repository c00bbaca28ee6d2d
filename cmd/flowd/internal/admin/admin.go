// Package admin holds flowd's admin commands, which an operator runs at the
// server against its database: organizations, staff accounts, API clients,
// keys, consent definitions, receipts and the demo set-up. Each opens the
// database itself and records its changes in the organization's audit log.
package admin

import "github.com/flowd/flowd/cmd/flowd/internal/command"

// Commands are the admin commands, each a group of subcommands (the demo
// runs alone), as flowd's command table lists them.
func Commands() []command.Command {
	return []command.Command{
		{Name: "orgs", Summary: "organizations", Subcommands: []command.Command{
			{Name: "create", Synopsis: `--name NAME [--org-number N] [--prefix P] [--redirect-origins "URL ..."] [--json]`,
				Run: runOrgsCreate, Summary: "create an organization and its first webhook signing secret"},
			{Name: "list", Synopsis: "[--json]", Run: runOrgsList, Summary: "list the organizations"},
			{Name: "rotate-webhook-secret", Synopsis: "--org ORG_ID [--json]", Run: runRotateWebhookSecret,
				Summary: "make a new webhook signing secret (the old one signs for 24 h more)"},
			{Name: "rotate-webhook-key", Synopsis: "--org ORG_ID [--json]", Run: runRotateWebhookKey,
				Summary: "make a new ed25519 webhook signing key for v1a (the old one signs for 24 h more)"},
		}},
		{Name: "staff", Summary: "the console's staff accounts",
			Detail: "A disable, a password reset, a role change, a deletion and end-sessions end every session of\n" +
				"the account at once, at the console and at the sign-in service; each is in the organization's\n" +
				"audit log.",
			Subcommands: []command.Command{
				{Name: "create", Synopsis: "--org ORG_ID --username U --role admin|viewer [--name N] --password-stdin [--json]",
					Run: runStaffCreate, Summary: "create a console staff account (the password read from stdin)"},
				{Name: "disable", Synopsis: "--username U [--json]", Run: runStaffDisable,
					Summary: "stop a staff account from signing in"},
				{Name: "reset-password", Synopsis: "--username U --password-stdin [--json]", Run: runStaffResetPassword,
					Summary: "set a staff account's password; also lifts a sign-in pause after failed attempts"},
				{Name: "set-role", Synopsis: "--username U --role admin|viewer [--json]", Run: runStaffSetRole,
					Summary: "give a staff account another role"},
				{Name: "delete", Synopsis: "--username U [--json]", Run: runStaffDelete, Summary: "delete a staff account"},
				{Name: "sessions", Synopsis: "--username U [--json]", Run: runStaffSessions,
					Summary: "list a staff account's live sessions"},
				{Name: "end-sessions", Synopsis: "--username U [--json]", Run: runStaffEndSessions,
					Summary: "end every session of a staff account"},
			}},
		{Name: "clients", Summary: "API clients", Subcommands: []command.Command{
			{Name: "create", Synopsis: `--org ORG_ID [--name N] [--scopes "flows:read flows:write"] [--sandbox] [--dpop] [--jwks FILE|- | --jwks-uri URL [--secret]] [--json]`,
				Run: runClientsCreate, Summary: "create an API client; its secret is printed once",
				Detail: "With --jwks or --jwks-uri the client authenticates with private_key_jwt and has no secret\n" +
					"unless --secret."},
			{Name: "list", Synopsis: "--org ORG_ID [--json]", Run: runClientsList,
				Summary: "list an organization's clients, mapped clients of external issuers included"},
			{Name: "rotate", Synopsis: "CLIENT_ID [--json]", Run: runClientsRotate,
				Summary: "give a client a new secret, printed once; the old one stops working at once"},
			{Name: "revoke", Synopsis: "CLIENT_ID [--json]", Run: runClientsRevoke,
				Summary: "revoke a client: it gets no more tokens, and its tokens stop working at once"},
			{Name: "keys", Synopsis: "CLIENT_ID --jwks FILE|- | --jwks-uri URL [--json]", Run: runClientsKeys,
				Summary: "replace a client's public keys (private_key_jwt)"},
			{Name: "map", Synopsis: "--org ORG_ID --issuer URL --client-id ID [--scopes S] [--sandbox] [--json]", Run: runClientsMap,
				Summary: "accept an external issuer's client as one of the organization's"},
			{Name: "dpop", Synopsis: "CLIENT_ID on|off [--json]", Run: runClientDPoP,
				Summary: "require DPoP-bound tokens (RFC 9449) of a client, or stop requiring them"},
			{Name: "rate-limit", Synopsis: "CLIENT_ID [--per-minute N|default] [--issuer URL] [--json]", Run: runClientRateLimit,
				Summary: "show a client's API rate limit, or set its own (N a minute, 0 none) or the default"},
		}},
		{Name: "keys", Summary: "signing and data keys", Subcommands: []command.Command{
			{Name: "rotate", Synopsis: "[--json]", Run: runKeysRotate,
				Summary: "make new token-signing keys (ES256 and RS256) and a new receipt key"},
			{Name: "rotate-data-key", Synopsis: "[--batch N] [--json]", Run: runRotateDataKey,
				Summary: "re-seal personal data under FLOWD_DATA_KEY (old keys in FLOWD_DATA_KEY_PREVIOUS)"},
		}},
		{Name: "definitions", Summary: "an organization's consent definitions, printed with --json as the API shows them",
			Subcommands: []command.Command{
				{Name: "list", Synopsis: "--org ORG_ID [--json]", Run: runDefinitionsList,
					Summary: "list the organization's consent definitions"},
				{Name: "show", Synopsis: "ID --org ORG_ID [--version N] [--json]", Run: runDefinitionsShow,
					Summary: "show a consent definition's version (the latest by default)"},
				{Name: "publish", Synopsis: "--org ORG_ID --file FILE|- [--id ID] [--json]", Run: runDefinitionsPublish,
					Summary: "publish a consent definition's next version (version 1 of a new one)"},
				{Name: "retire", Synopsis: "ID --org ORG_ID [--json]", Run: runDefinitionsRetire,
					Summary: "retire a consent definition: no new flow uses it"},
			}},
		{Name: "resources", Summary: "the resources a data holder serves, which consent tokens name as their audience",
			Subcommands: []command.Command{
				{Name: "create", Synopsis: "--org ORG_ID --uri URI --name NAME [--json]", Run: runResourcesCreate,
					Summary: "register a resource of the organization: an absolute URI and a name"},
			}},
		{Name: "flows", Summary: "flows", Subcommands: []command.Command{
			{Name: "reindex", Synopsis: "[--batch N] [--json]", Run: runFlowsReindex,
				Summary: "fill in the blind index the person's own page finds flows by, printing progress"},
			{Name: "rekey", Synopsis: "[--batch N] [--json]", Run: runFlowsRekey,
				Summary: "move the personal data of older flows under per-person keys, printing progress"},
		}},
		{Name: "receipts", Summary: "consent receipts and records", Subcommands: []command.Command{
			{Name: "verify", Synopsis: "FILE [--jwks URL|FILE] [--json]", Run: runReceiptsVerify,
				Summary: "check a consent receipt (- reads stdin), offline with --jwks"},
			{Name: "lint", Synopsis: "FILE", Run: runReceiptsLint,
				Summary: "check a consent record or receipt (- reads stdin) against the schema of /schemas/consent-record.json; no key needed"},
		}},
		{Name: "erasures", Summary: "erasures of people, and their tombstones for restores from backups",
			Detail: "Run reapply as a step of every restore from a backup, with an export kept apart from the\n" +
				"database's backups: it erases again everyone erased since the backup was taken.",
			Subcommands: []command.Command{
				{Name: "export", Synopsis: "[--out FILE]", Run: runErasuresExport,
					Summary: "write every erasure's tombstone, one JSON object a line, to stdout or a file"},
				{Name: "reapply", Synopsis: "FILE [--json]", Run: runErasuresReapply,
					Summary: "after a restore, erase again everyone in an export whom the database still holds"},
			}},
		{Name: "demo", Synopsis: "--state FILE", Run: runDemo,
			Summary: "create (once) and print a demo organization, API client and staff admin, as make run does"},
	}
}
