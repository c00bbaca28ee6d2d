package admin

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/cmd/flowd/internal/wiring"
	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/audit"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/webhooks"
)

// adminEnv is what an admin command works with: the settings, a small pool
// on a migrated database, and the identity module's parts.
type adminEnv struct {
	cfg  *config.Config
	pool *pgxpool.Pool
	*wiring.Identity
}

// openAdmin loads the settings and opens the database for an admin command;
// the caller closes the pool.
func openAdmin(ctx context.Context, sys command.Env, need config.Need) (*adminEnv, error) {
	need.Database = true
	cfg, err := config.Load(sys.Getenv, need)
	if err != nil {
		return nil, err
	}
	pool, err := database.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return nil, err
	}
	current, err := database.MigrationsCurrent(ctx, pool)
	if err != nil || !current {
		pool.Close()
		if err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
		return nil, errors.New("the database is not migrated: run `flowd migrate` first")
	}
	parts, err := wiring.NewIdentity(wiring.Env{Config: cfg, Pool: pool, Log: wiring.NewLogger(sys.Stderr, cfg.LogLevel)})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &adminEnv{cfg: cfg, pool: pool, Identity: parts}, nil
}

// modules builds the other modules as serve does, for a command that
// loaded the secrets; they log nothing and keep their metrics to themselves.
func (env *adminEnv) modules() (*wiring.Modules, error) {
	return wiring.NewModules(wiring.Env{Config: env.cfg, Pool: env.pool}, env.Identity)
}

// createOrganization makes an organization and its first webhook signing
// secret in one transaction: an organization never exists without one.
func (env *adminEnv) createOrganization(ctx context.Context, in orgs.NewOrganization) (orgs.Organization, webhooks.Secret, error) {
	hooks, err := wiring.NewWebhooks(wiring.Env{Config: env.cfg, Pool: env.pool})
	if err != nil {
		return orgs.Organization{}, webhooks.Secret{}, err
	}
	var org orgs.Organization
	var secret webhooks.Secret
	err = database.WithTx(ctx, env.pool, func(tx database.Tx) error {
		if org, err = env.Orgs.CreateOrganizationTx(ctx, tx, in); err != nil {
			return err
		}
		secret, err = hooks.CreateSecretTx(ctx, tx, org.ID)
		return err
	})
	return org, secret, err
}

// adminError turns an application error into one line for the terminal.
func adminError(err error) error { return oneLine(err, "") }

// oneLine spells out an application error and its fields on one line, each
// field named with prefix (e.g. "--" where fields are the command's flags).
// Of a fault (the database unreachable, a bug) it tells the cause too: the
// operator at the terminal is the one who would read it in a server's log.
func oneLine(err error, prefix string) error {
	e, ok := apperr.As(err)
	if !ok {
		return err
	}
	if (e.Code == apperr.Internal || e.Code == apperr.Unavailable) && e.Err != nil {
		return fmt.Errorf("%s (%w)", e.Message, e.Err)
	}
	if len(e.Fields) == 0 {
		return errors.New(e.Message)
	}
	var parts []string
	for _, f := range e.Fields {
		parts = append(parts, prefix+f.Field+" "+f.Message)
	}
	return errors.New(e.Message + " " + strings.Join(parts, "; "))
}

// operatorActor is the audit log's actor of changes made with the CLI: the
// operator at the server, whom flowd does not know by name.
const operatorActor = "operator:cli"

// byOperator records a change made with the CLI in its organization's
// audit log, in the change's transaction, as the console records its staff's.
func byOperator[T any](log audit.Log, action string, describe func(done T) (organizationID, target, detail string)) database.BeforeCommit[T] {
	return func(ctx context.Context, tx database.Tx, done T) error {
		org, target, detail := describe(done)
		return log.RecordAuditTx(ctx, tx, identity.AuditEntry{OrganizationID: org, Actor: operatorActor, Action: action, Target: target, Detail: detail})
	}
}

// runOrgsCreate handles "flowd orgs create".
func runOrgsCreate(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("orgs create", flag.ContinueOnError)
	name := fs.String("name", "", "the organization's name (required)")
	number := fs.String("org-number", "", "the organization number, e.g. a company registration number")
	prefix := fs.String("prefix", "", "reference prefix of its flows, 2-8 letters or digits (default: from the name)")
	origins := fs.String("redirect-origins", "", "space-separated origins a flow's redirectUrl may use (default: any)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	// The secrets are needed: FLOWD_KEY_ENCRYPTION_KEY seals the webhook signing secret.
	env, err := openAdmin(ctx, sys, config.Need{Secrets: true})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	org, secret, err := env.createOrganization(ctx, orgs.NewOrganization{
		Name: *name, OrganizationNumber: *number, ReferencePrefix: *prefix, RedirectOrigins: splitList(*origins),
	})
	if err != nil {
		return adminError(err)
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"id": org.ID, "name": org.Name, "referencePrefix": org.ReferencePrefix,
			"webhookSecret": secret.Value})
	}
	fmt.Fprintf(sys.Stdout, "Created organization %q\n  id                %s\n  reference prefix  %s\n  webhook secret    %s\n",
		org.Name, org.ID, org.ReferencePrefix, secret.Value)
	if org.OrganizationNumber != "" {
		fmt.Fprintf(sys.Stdout, "  org number        %s\n", org.OrganizationNumber)
	}
	fmt.Fprintf(sys.Stdout, "Next: flowd clients create --org %s\n", org.ID)
	return nil
}

// runOrgsList handles "flowd orgs list".
func runOrgsList(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("orgs list", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	env, err := openAdmin(ctx, sys, config.Need{})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	orgs, err := env.Orgs.ListOrganizations(ctx)
	if err != nil {
		return adminError(err)
	}
	if *asJSON {
		list := make([]map[string]any, len(orgs))
		for i, o := range orgs {
			list[i] = map[string]any{"id": o.ID, "name": o.Name, "organizationNumber": o.OrganizationNumber,
				"referencePrefix": o.ReferencePrefix, "redirectOrigins": nonNil(o.RedirectOrigins), "createdAt": o.CreatedAt}
		}
		return command.PrintJSON(sys.Stdout, map[string]any{"organizations": list})
	}
	if len(orgs) == 0 {
		fmt.Fprintln(sys.Stdout, "No organizations yet: flowd orgs create --name NAME")
		return nil
	}
	for _, o := range orgs {
		fmt.Fprintf(sys.Stdout, "%s  %-8s  %s\n", o.ID, o.ReferencePrefix, o.Name)
	}
	return nil
}

// splitList splits a flag's list on spaces or commas.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// runClientsCreate handles "flowd clients create": an API client of an
// organization, with a secret or public keys (private_key_jwt) or both.
func runClientsCreate(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("clients create", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	dpop := fs.Bool("dpop", false, "require DPoP (RFC 9449): token requests without a DPoP proof are refused")
	org := fs.String("org", "", "the organization's id (required)")
	name := fs.String("name", "", `a name for the client (default "API client")`)
	scopes := fs.String("scopes", "", `space-separated scopes (default all: "`+strings.Join(identity.AllScopes, " ")+`")`)
	sandbox := fs.Bool("sandbox", false, "a sandbox client: its flows carry sandbox: true")
	var keys keyFlags
	keys.define(fs)
	withSecret := fs.Bool("secret", false, "with --jwks or --jwks-uri: give the client a secret too (to migrate)")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" {
		return command.Usagef("clients create: --org is required")
	}
	clientKeys, err := keys.read(sys.Stdin)
	if err != nil {
		return fmt.Errorf("clients create: %w", err)
	}
	if *withSecret && clientKeys.IsZero() {
		return errors.New("clients create: --secret goes with --jwks or --jwks-uri (a client without keys always has a secret)")
	}
	env, err := openAdmin(ctx, sys, config.Need{})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	id := env.Orgs
	cc, err := id.CreateClient(ctx, orgs.NewClient{OrganizationID: *org, Name: *name, Scopes: splitList(*scopes), Sandbox: *sandbox,
		Keys: clientKeys, AlsoSecret: *withSecret, DPoPBound: *dpop},
		byOperator(env.Audit, identity.AuditClientCreate, func(cc orgs.ClientCredentials) (string, string, string) {
			return cc.OrganizationID, cc.ID, orgs.ClientCreatedDetail(cc.Client)
		}))
	if err != nil {
		return oneLine(err, "--")
	}
	return printCredentials(sys.Stdout, env.cfg, cc, *asJSON, "Created")
}

// runClientsList handles "flowd clients list": an organization's clients
// and the clients of external issuers mapped to it.
func runClientsList(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("clients list", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	org := fs.String("org", "", "the organization's id (required)")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" {
		return command.Usagef("clients list: --org is required")
	}
	env, err := openAdmin(ctx, sys, config.Need{})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	id := env.Orgs
	if _, err := id.Organization(ctx, *org); err != nil {
		return adminError(err)
	}
	clients, err := id.ListClients(ctx, *org)
	if err != nil {
		return adminError(err)
	}
	mapped, err := id.ListExternalClients(ctx, *org)
	if err != nil {
		return adminError(err)
	}
	if *asJSON {
		list := make([]map[string]any, len(clients))
		for i, c := range clients {
			list[i] = map[string]any{"clientId": c.ID, "name": c.Name, "scopes": c.Scopes, "sandbox": c.Sandbox,
				"authMethods": c.AuthMethods(), "createdAt": c.CreatedAt, "lastUsedAt": c.LastUsedAt, "revokedAt": c.RevokedAt, "dpopBound": c.DPoPBound,
				"rateLimit": ownRateLimit(c.RateLimit)}
		}
		ext := make([]map[string]any, len(mapped))
		for i, x := range mapped {
			ext[i] = map[string]any{"issuer": x.Issuer, "clientId": x.ClientID, "scopes": x.Scopes, "sandbox": x.Sandbox, "createdAt": x.CreatedAt,
				"rateLimit": ownRateLimit(x.RateLimit)}
		}
		return command.PrintJSON(sys.Stdout, map[string]any{"clients": list, "externalClients": ext})
	}
	if len(clients)+len(mapped) == 0 {
		fmt.Fprintf(sys.Stdout, "No clients yet: flowd clients create --org %s\n", *org)
	}
	for _, c := range clients {
		state := "active"
		if c.Revoked() {
			state = "revoked"
		}
		last := "never used"
		if c.LastUsedAt != nil {
			last = "last used " + c.LastUsedAt.Format("2006-01-02 15:04")
		}
		sb := ""
		if c.Sandbox {
			sb = " sandbox"
		}
		if c.DPoPBound {
			sb += " dpop"
		}
		switch {
		case c.RateLimit.Own && c.RateLimit.PerMinute == 0:
			sb += " no-rate-limit"
		case c.RateLimit.Own:
			sb += " rate-limit " + strconv.Itoa(c.RateLimit.PerMinute) + "/min"
		}
		fmt.Fprintf(sys.Stdout, "%s  %-7s  %s  %q  %s%s  auth %s\n", c.ID, state, strings.Join(c.Scopes, " "), c.Name, last, sb,
			strings.Join(c.AuthMethods(), " "))
	}
	for _, x := range mapped {
		fmt.Fprintf(sys.Stdout, "%s  mapped   %s  issuer %s\n", x.ClientID, strings.Join(x.Scopes, " "), x.Issuer)
	}
	return nil
}

// runClientsRotate handles "flowd clients rotate CLIENT_ID": a new secret,
// printed once.
func runClientsRotate(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("clients rotate", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	clientID, err := parseClientID(fs, args)
	if err != nil {
		return err
	}
	env, c, err := openClient(ctx, sys, clientID)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	id := env.Orgs
	cc, err := id.RotateClientSecret(ctx, c.OrganizationID, c.ID,
		byOperator(env.Audit, identity.AuditClientRotate, func(cc orgs.ClientCredentials) (string, string, string) {
			return cc.OrganizationID, cc.ID, cc.Name
		}))
	if err != nil {
		return adminError(err)
	}
	return printCredentials(sys.Stdout, env.cfg, cc, *asJSON, "Rotated the secret of")
}

// runClientsKeys handles "flowd clients keys CLIENT_ID": the client's new
// public keys replace its old ones at once.
func runClientsKeys(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("clients keys", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	var keys keyFlags
	keys.define(fs)
	clientID, err := parseClientID(fs, args)
	if err != nil {
		return err
	}
	clientKeys, err := keys.read(sys.Stdin)
	if err != nil {
		return fmt.Errorf("clients keys: %w", err)
	}
	if clientKeys.IsZero() {
		return command.Usagef("clients keys: give the new keys with --jwks FILE or --jwks-uri URL")
	}
	env, c, err := openClient(ctx, sys, clientID)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	id := env.Orgs
	c, err = id.ReplaceClientKeys(ctx, c.OrganizationID, c.ID, clientKeys,
		byOperator(env.Audit, identity.AuditClientKeys, func(c orgs.Client) (string, string, string) {
			return c.OrganizationID, c.ID, orgs.ClientKeysDetail(c)
		}))
	if err != nil {
		return oneLine(err, "--")
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"clientId": c.ID, "authMethods": c.AuthMethods(), "jwksUri": c.Keys.JWKSURI})
	}
	fmt.Fprintf(sys.Stdout, "Replaced the keys of client %s: assertions signed with the previous keys are refused from now on.\n", c.ID)
	return nil
}

// runClientsRevoke handles "flowd clients revoke CLIENT_ID".
func runClientsRevoke(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("clients revoke", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	clientID, err := parseClientID(fs, args)
	if err != nil {
		return err
	}
	env, c, err := openClient(ctx, sys, clientID)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	id := env.Orgs
	c, err = id.RevokeClient(ctx, c.OrganizationID, c.ID,
		byOperator(env.Audit, identity.AuditClientRevoke, func(c orgs.Client) (string, string, string) {
			return c.OrganizationID, c.ID, c.Name
		}))
	if err != nil {
		return adminError(err)
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"clientId": c.ID, "revokedAt": c.RevokedAt})
	}
	fmt.Fprintf(sys.Stdout, "Revoked client %s: it gets no new token, and its tokens stop working now.\n", c.ID)
	return nil
}

// runClientsMap handles "flowd clients map": tokens of an external
// issuer's client count as the organization's.
func runClientsMap(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("clients map", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	org := fs.String("org", "", "the organization's id (required)")
	issuer := fs.String("issuer", "", "the external issuer's URL (required)")
	clientID := fs.String("client-id", "", "the client id in that issuer's tokens (required)")
	scopes := fs.String("scopes", "", "scopes granted when a token carries none of flowd's (default all)")
	sandbox := fs.Bool("sandbox", false, "a sandbox client: its flows carry sandbox: true")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" {
		return command.Usagef("clients map: --org is required")
	}
	if *clientID == "" {
		return command.Usagef("clients map: --client-id is required")
	}
	env, err := openAdmin(ctx, sys, config.Need{})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	id := env.Orgs
	x, err := id.MapExternalClient(ctx, orgs.ExternalClient{Issuer: *issuer, ClientID: *clientID, OrganizationID: *org,
		Scopes: splitList(*scopes), Sandbox: *sandbox})
	if err != nil {
		return adminError(err)
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"issuer": x.Issuer, "clientId": x.ClientID, "organizationId": x.OrganizationID,
			"scopes": x.Scopes, "sandbox": x.Sandbox})
	}
	fmt.Fprintf(sys.Stdout, "Mapped client %s of %s to organization %s (scopes %s)\n", x.ClientID, x.Issuer, x.OrganizationID, strings.Join(x.Scopes, " "))
	if env.cfg.OIDCIssuer == "" || strings.TrimRight(env.cfg.OIDCIssuer, "/") != x.Issuer {
		fmt.Fprintf(sys.Stdout, "Note: tokens of %s are accepted only when FLOWD_OIDC_ISSUER names it.\n", x.Issuer)
	}
	return nil
}

// openClient opens what a command on one client needs and finds the client,
// so that each such command reports an unknown client the same way. The
// caller closes env.pool.
func openClient(ctx context.Context, sys command.Env, clientID string) (*adminEnv, orgs.Client, error) {
	env, err := openAdmin(ctx, sys, config.Need{})
	if err != nil {
		return nil, orgs.Client{}, err
	}
	c, err := env.Orgs.Client(ctx, clientID)
	if err != nil {
		env.pool.Close()
		return nil, orgs.Client{}, adminError(err)
	}
	return env, c, nil
}

// parseClientID parses the flags of a command on one client, which it names
// as its argument or with --client-id.
func parseClientID(fs *flag.FlagSet, args []string) (string, error) {
	flagged := fs.String("client-id", "", "the client's id (required; or give it as the argument)")
	clientID, err := command.ParseFlagsAndName(fs, args)
	if err != nil {
		return "", err
	}
	switch {
	case clientID == "":
		clientID = *flagged
	case *flagged != "" && *flagged != clientID:
		return "", command.Usagef("%s: the argument %q and --client-id %q name two clients", fs.Name(), clientID, *flagged)
	}
	if clientID == "" {
		return "", command.Usagef("%s: --client-id is required", fs.Name())
	}
	return clientID, nil
}

// printCredentials shows a client's id and secret, once, and how it
// authenticates. An assertion-only client has no secret to show.
func printCredentials(w io.Writer, cfg *config.Config, cc orgs.ClientCredentials, asJSON bool, verb string) error {
	if asJSON {
		out := map[string]any{"clientId": cc.ID, "scopes": cc.Scopes, "sandbox": cc.Sandbox, "authMethods": cc.AuthMethods(), "dpopBound": cc.DPoPBound}
		if cc.Secret != "" {
			out["clientSecret"] = cc.Secret
		}
		if cc.Keys.JWKSURI != "" {
			out["jwksUri"] = cc.Keys.JWKSURI
		}
		return command.PrintJSON(w, out)
	}
	kind := "client"
	if cc.Sandbox {
		kind = "sandbox client"
	}
	fmt.Fprintf(w, "%s %s %s of organization %s\n  client_id      %s\n", verb, kind, cc.ID, cc.OrganizationID, cc.ID)
	if cc.Secret != "" {
		fmt.Fprintf(w, "  client_secret  %s\n", cc.Secret)
	}
	fmt.Fprintf(w, "  auth methods   %s\n  scopes         %s\n  token URL      %s\n",
		strings.Join(cc.AuthMethods(), " "), strings.Join(cc.Scopes, " "), cfg.URL("/oauth/token"))
	if cc.Secret != "" {
		fmt.Fprintln(w, "The secret is shown only now: store it safely.")
	}
	return nil
}

// keyFlags are the flags that give a client's public keys for private_key_jwt.
type keyFlags struct {
	jwksFile, jwksURI *string
}

func (k *keyFlags) define(fs *flag.FlagSet) {
	k.jwksFile = fs.String("jwks", "", "a JSON Web Key Set file of the client's public keys, for private_key_jwt (- for stdin)")
	k.jwksURI = fs.String("jwks-uri", "", "an https URL of the client's JSON Web Key Set (its host must be in FLOWD_CLIENT_JWKS_HOSTS)")
}

// read returns the keys the flags give; none when they were not defined or not set.
func (k *keyFlags) read(stdin io.Reader) (orgs.ClientKeys, error) {
	if k.jwksFile == nil {
		return orgs.ClientKeys{}, nil
	}
	keys := orgs.ClientKeys{JWKSURI: *k.jwksURI}
	switch *k.jwksFile {
	case "":
		return keys, nil
	case "-":
		raw, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
		if err != nil {
			return keys, fmt.Errorf("reading the key set from stdin: %w", err)
		}
		keys.JWKS = raw
	default:
		raw, err := os.ReadFile(*k.jwksFile)
		if err != nil {
			return keys, fmt.Errorf("--jwks: %w", err)
		}
		keys.JWKS = raw
	}
	if len(bytes.TrimSpace(keys.JWKS)) == 0 {
		return keys, errors.New("--jwks: the key set is empty")
	}
	return keys, nil
}
