package admin

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// runClientRateLimit handles "flowd clients rate-limit CLIENT_ID
// [--per-minute N|default] [--issuer URL]": it shows the client's API rate
// limit, or sets its own (N requests per minute, 0 for none), or returns it
// to the default (FLOWD_API_RATE_LIMIT). With --issuer the client is a
// mapped client of that external issuer. A change is in the organization's
// audit log, by the operator; every instance applies it within seconds.
func runClientRateLimit(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("clients rate-limit", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	perMinute := fs.String("per-minute", "", `the client's own limit of API requests per minute (0: none), or "default"`)
	issuer := fs.String("issuer", "", "the external issuer of a mapped client (see clients map)")
	clientID, err := command.ParseFlagsAndName(fs, args)
	if err != nil {
		return err
	}
	if clientID == "" {
		return command.Usagef("clients rate-limit: give the client id: flowd clients rate-limit CLIENT_ID [--per-minute N|default]")
	}
	var limit identity.RateLimit
	switch *perMinute {
	case "", "default":
	default:
		n, err := strconv.Atoi(*perMinute)
		if err != nil || n < 0 || n > identity.MaxRateLimit {
			return command.Usagef("clients rate-limit: --per-minute must be a whole number from 0 (no limit) to %d, or default, not %q", identity.MaxRateLimit, *perMinute)
		}
		limit = identity.RateLimit{Own: true, PerMinute: n}
	}
	env, err := openAdmin(ctx, sys, config.Need{})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	id := env.Orgs
	if *issuer != "" {
		if *perMinute == "" {
			return command.Usagef("clients rate-limit: with --issuer, give --per-minute N or default")
		}
		x, err := id.SetExternalClientRateLimit(ctx, *issuer, clientID, limit,
			byOperator(env.Audit, identity.AuditClientRateLimit, func(x orgs.ExternalClient) (string, string, string) {
				return x.OrganizationID, x.ClientID, orgs.RateLimitAuditDetail(x.Issuer, x.RateLimit)
			}))
		if err != nil {
			return adminError(err)
		}
		return printRateLimit(sys.Stdout, env.cfg, x.ClientID, x.RateLimit, *asJSON)
	}
	c, err := id.Client(ctx, clientID)
	if err != nil {
		return adminError(err)
	}
	if *perMinute != "" {
		c, err = id.SetClientRateLimit(ctx, c.OrganizationID, c.ID, limit,
			byOperator(env.Audit, identity.AuditClientRateLimit, func(ch orgs.ClientChange) (string, string, string) {
				return ch.After.OrganizationID, ch.After.ID, orgs.RateLimitAuditDetail(ch.After.Name, ch.After.RateLimit)
			}))
		if err != nil {
			return adminError(err)
		}
	}
	return printRateLimit(sys.Stdout, env.cfg, c.ID, c.RateLimit, *asJSON)
}

// printRateLimit shows the limit a client is held to: {"clientId",
// "perMinute" (0: none), "default" (whether it is the deployment's default,
// as this command's FLOWD_API_RATE_LIMIT says)}.
func printRateLimit(w io.Writer, cfg *config.Config, clientID string, r identity.RateLimit, asJSON bool) error {
	perMinute := cfg.APIRateLimit
	if r.Own {
		perMinute = r.PerMinute
	}
	if asJSON {
		return command.PrintJSON(w, map[string]any{"clientId": clientID, "perMinute": perMinute, "default": !r.Own})
	}
	limit := "no limit"
	if perMinute > 0 {
		limit = strconv.Itoa(perMinute) + " API requests per minute"
	}
	if !r.Own {
		limit += ", the default (FLOWD_API_RATE_LIMIT)"
	}
	_, err := fmt.Fprintf(w, "Client %s: %s.\n", clientID, limit)
	return err
}

// ownRateLimit is a client's own limit per minute for clients list --json
// (0: none), or nil when the default applies.
func ownRateLimit(r identity.RateLimit) any {
	if !r.Own {
		return nil
	}
	return r.PerMinute
}
