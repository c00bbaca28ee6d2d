package admin

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/web"
)

// runResourcesCreate handles "flowd resources create": an organization
// registers a resource it serves as a data holder, as POST /api/resources
// does, recorded in its audit log as the operator's.
func runResourcesCreate(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("resources create", flag.ContinueOnError)
	org := fs.String("org", "", "organization id of the data holder (required)")
	uri := fs.String("uri", "", "the resource's absolute URI, a consent token's audience (required)")
	name := fs.String("name", "", "the resource's name for people (required)")
	asJSON := fs.Bool("json", false, "print JSON, as the API answers")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(*org) == "" {
		return command.Usagef("resources create: --org is required")
	}
	env, err := openAdmin(ctx, sys, config.Need{})
	if err != nil {
		return err
	}
	defer env.pool.Close()
	author := consent.Author{OrganizationID: strings.TrimSpace(*org), By: "cli"}
	if ok, err := env.Orgs.OrganizationExists(ctx, author.OrganizationID); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("resources create: no organization %s", author.OrganizationID)
	}
	r, err := consent.NewResources(env.pool).CreateResource(ctx, author, consent.NewResource{URI: *uri, Name: *name},
		byOperator(env.Audit, identity.AuditResourceCreate, func(r consent.Resource) (string, string, string) {
			return r.OrganizationID, r.URI, r.Name
		}))
	if err != nil {
		return cliError(err)
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, web.NewResourceJSON(r))
	}
	fmt.Fprintf(sys.Stdout, "resource %s registered: %s (%s)\n", r.ID, r.URI, r.Name)
	return nil
}
