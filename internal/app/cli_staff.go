package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/login"
)

const staffUsage = `Usage:
  flowd staff create --org ORG_ID --username U --role admin|viewer [--name N] --password-stdin [--json]
  flowd staff disable --username U [--json]
  flowd staff reset-password --username U --password-stdin [--json]
`

// runStaff handles "flowd staff …": the console's staff accounts.
func runStaff(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, staffUsage)
		return errors.New("staff: no subcommand given")
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("staff "+sub, flag.ContinueOnError)
	username := fs.String("username", "", "username or e-mail address")
	asJSON := fs.Bool("json", false, "print one JSON object")
	var org, role, name *string
	var passwordStdin *bool
	switch sub {
	case "create":
		org = fs.String("org", "", "organization id")
		role = fs.String("role", "", "admin or viewer")
		name = fs.String("name", "", "the person's name (optional)")
		passwordStdin = fs.Bool("password-stdin", false, "read the password from standard input")
	case "reset-password":
		passwordStdin = fs.Bool("password-stdin", false, "read the password from standard input")
	case "disable":
	default:
		fmt.Fprint(stderr, staffUsage)
		return fmt.Errorf("staff: unknown subcommand %q", sub)
	}
	if err := parseFlags(fs, rest, stderr); err != nil {
		return err
	}
	if *username == "" {
		return errors.New("staff " + sub + ": --username is required")
	}
	var password string
	if passwordStdin != nil {
		if !*passwordStdin {
			return errors.New("staff " + sub + ": --password-stdin is required (passwords never go on the command line)")
		}
		p, err := readPassword(stdin)
		if err != nil {
			return err
		}
		password = p
	}

	env, err := openAdmin(ctx, getenv, config.Need{}, stderr)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	staff, err := login.NewStaff(env.pool, organizationDirectory{env.identity}, login.StaffConfig{})
	if err != nil {
		return err
	}

	var a identity.StaffAccount
	var summary string
	switch sub {
	case "create":
		a, err = staff.CreateStaff(ctx, identity.NewStaffAccount{
			OrganizationID: strings.TrimSpace(*org), Username: *username, Name: strings.TrimSpace(*name),
			Role: identity.Role(*role), Password: password,
		})
		summary = "created staff account %s (%s) in organization %s\n"
	case "disable":
		a, err = staff.DisableStaff(ctx, *username)
		summary = "disabled staff account %s (%s) of organization %s\n"
	case "reset-password":
		a, err = staff.ResetStaffPassword(ctx, *username, password)
		summary = "set a new password for staff account %s (%s) of organization %s\n"
	}
	if err != nil {
		return cliError(err)
	}
	if *asJSON {
		out := map[string]any{"id": a.ID, "username": a.Username, "role": a.Role}
		if sub == "disable" {
			out["disabled"] = true
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	fmt.Fprintf(stdout, summary, a.Username, a.Role, a.OrganizationID)
	return nil
}

// readPassword reads one line from stdin, without its line ending.
func readPassword(stdin io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(stdin, identity.MaxPasswordLength+3)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("no password on standard input")
	}
	return line, nil
}

// cliError spells out an application error's fields, named as the flags that set them.
func cliError(err error) error { return oneLine(err, "--") }
