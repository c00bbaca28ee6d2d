package admin

import (
	"context"
	"flag"
	"fmt"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// runClientDPoP handles "flowd clients dpop CLIENT_ID on|off": whether the
// client must send DPoP proofs, so that every token it gets is DPoP-bound.
// The change is in the organization's audit log, by the operator.
func runClientDPoP(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("clients dpop", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	var positional []string
	for len(args) > 0 && len(positional) < 2 && args[0] != "" && args[0][0] != '-' {
		positional, args = append(positional, args[0]), args[1:]
	}
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if len(positional) != 2 || (positional[1] != "on" && positional[1] != "off") {
		return command.Usagef("clients dpop: give the client id and on or off: flowd clients dpop CLIENT_ID on|off")
	}
	clientID, on := positional[0], positional[1] == "on"
	env, c, err := openClient(ctx, sys, clientID)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	c, err = env.Orgs.SetClientDPoP(ctx, c.OrganizationID, c.ID, on, byOperator(env.Audit, identity.AuditClientDPoP, func(ch orgs.ClientChange) (string, string, string) {
		return ch.After.OrganizationID, ch.After.ID, orgs.DPoPAuditDetail(ch.After)
	}))
	if err != nil {
		return adminError(err)
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"clientId": c.ID, "dpopBound": c.DPoPBound})
	}
	if c.DPoPBound {
		fmt.Fprintf(sys.Stdout, "Client %s must now send DPoP proofs: its token requests without one are refused, and its tokens are DPoP-bound.\n", c.ID)
	} else {
		fmt.Fprintf(sys.Stdout, "Client %s may now obtain bearer tokens; DPoP stays available to it.\n", c.ID)
	}
	return nil
}
