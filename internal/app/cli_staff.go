package app

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/staff"
)

const staffUsage = `Usage:
  flowd staff create --org ORG_ID --username U --role admin|viewer [--name N] --password-stdin [--json]
  flowd staff disable --username U [--json]
  flowd staff reset-password --username U --password-stdin [--json]
  flowd staff set-role --username U --role admin|viewer [--json]
  flowd staff delete --username U [--json]
  flowd staff sessions --username U [--json]
  flowd staff end-sessions --username U [--json]
A disable, a password reset, a role change, a deletion and end-sessions end
every session of the account at once, at the console and at the sign-in
service; each is in the organization's audit log.
`

// runStaff handles "flowd staff …": the console's staff accounts.
func runStaff(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, staffUsage)
		return errors.New("staff: no subcommand given")
	}
	switch args[0] {
	case "sessions":
		return runStaffSessions(ctx, args[1:], getenv, stdout, stderr)
	case "end-sessions":
		return runStaffEndSessions(ctx, args[1:], getenv, stdout, stderr)
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
	case "set-role":
		role = fs.String("role", "", "admin or viewer")
	case "disable", "delete":
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

	env, accounts, err := openStaff(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer env.pool.Close()

	var ch staff.Change
	var summary string
	switch sub {
	case "create":
		ch.Account, err = accounts.CreateStaff(ctx, staff.NewAccount{
			OrganizationID: strings.TrimSpace(*org), Username: *username, Name: strings.TrimSpace(*name),
			Role: staff.Role(*role), Password: password,
		})
		summary = "created staff account %s (%s) in organization %s\n"
	case "disable":
		ch, err = accounts.DisableStaff(ctx, *username, env.staffAudited(identity.AuditStaffDisable, staff.EndedByDisable))
		summary = "disabled staff account %s (%s) of organization %s\n"
	case "reset-password":
		ch, err = accounts.ResetStaffPassword(ctx, *username, password, env.staffAudited(identity.AuditStaffPasswordReset, staff.EndedByPasswordReset))
		summary = "set a new password for staff account %s (%s) of organization %s\n"
	case "set-role":
		ch, err = accounts.SetStaffRole(ctx, *username, staff.Role(*role), env.staffAudited(identity.AuditStaffRoleChange, staff.EndedByRoleChange))
		summary = "staff account %s now has the role %s in organization %s\n"
	case "delete":
		ch, err = accounts.DeleteStaff(ctx, *username, env.staffAudited(identity.AuditStaffDelete, staff.EndedByDelete))
		summary = "deleted staff account %s (%s) of organization %s\n"
	}
	if err != nil {
		return cliError(err)
	}
	if *asJSON {
		out := map[string]any{"id": ch.Account.ID, "username": ch.Account.Username, "role": ch.Account.Role}
		switch sub {
		case "disable":
			out["disabled"] = true
		case "delete":
			out["deleted"] = true
		}
		if sub != "create" {
			out["sessionsEnded"] = len(ch.Ended)
		}
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, summary, ch.Account.Username, ch.Account.Role, ch.Account.OrganizationID)
	if len(ch.Ended) > 0 {
		fmt.Fprintf(stdout, "ended %d session(s)\n", len(ch.Ended))
	}
	return nil
}

// openStaff opens the database and the staff accounts of an admin command.
func openStaff(ctx context.Context, getenv func(string) string, stderr io.Writer) (*adminEnv, *staff.AccountService, error) {
	env, err := openAdmin(ctx, getenv, config.Need{}, stderr)
	if err != nil {
		return nil, nil, err
	}
	accounts, err := staff.NewAccounts(env.pool, env.orgs, staff.Config{})
	if err != nil {
		env.pool.Close()
		return nil, nil, err
	}
	return env, accounts, nil
}

// staffAudited records, in the transaction of a change to a staff account,
// the change (action, unless "") and each session it ended (for why), by
// the operator.
func (env *adminEnv) staffAudited(action, why string) database.BeforeCommit[staff.Change] {
	return func(ctx context.Context, tx database.Tx, ch staff.Change) error {
		var entries []identity.AuditEntry
		if action != "" {
			entries = append(entries, identity.AuditEntry{OrganizationID: ch.Account.OrganizationID, Actor: operatorActor,
				Action: action, Target: ch.Account.Username,
				Detail: fmt.Sprintf("role %s; %d session(s) ended", ch.Account.Role, len(ch.Ended))})
		}
		for _, e := range append(entries, staff.SessionAuditEntries(operatorActor, why, ch.Ended)...) {
			if err := env.audit.RecordAuditTx(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	}
}

// sessionJSON is a session as the staff commands print it.
type sessionJSON struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"`
	StartedAt  time.Time `json:"startedAt"`
	LastSeenAt time.Time `json:"lastSeenAt"`
	EndsAt     time.Time `json:"endsAt"`
	UserAgent  string    `json:"userAgent"`
	Address    string    `json:"address"`
}

// runStaffSessions handles "flowd staff sessions --username U": the
// account's live sessions, newest first.
func runStaffSessions(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("staff sessions", flag.ContinueOnError)
	username := fs.String("username", "", "username or e-mail address")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *username == "" {
		return errors.New("staff sessions: --username is required")
	}
	env, accounts, err := openStaff(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	a, all, err := accounts.StaffSessions(ctx, *username)
	if err != nil {
		return cliError(err)
	}
	now := time.Now()
	live := []sessionJSON{}
	for _, s := range all {
		if s.LiveAt(now) {
			live = append(live, sessionJSON{ID: s.ID, Kind: string(s.Kind), StartedAt: s.CreatedAt.UTC(), LastSeenAt: s.LastSeenAt.UTC(),
				EndsAt: s.IdleUntil.UTC(), UserAgent: s.UserAgent, Address: s.Address})
			if s.ExpiresAt.Before(s.IdleUntil) {
				live[len(live)-1].EndsAt = s.ExpiresAt.UTC()
			}
		}
	}
	if *asJSON {
		return printJSON(stdout, map[string]any{"id": a.ID, "username": a.Username, "sessions": live})
	}
	fmt.Fprintf(stdout, "%d live session(s) of %s\n", len(live), a.Username)
	for _, s := range live {
		fmt.Fprintf(stdout, "%s  %-8s  started %s  last seen %s  %s  %s\n", s.ID, s.Kind, s.StartedAt.Format(time.RFC3339),
			s.LastSeenAt.Format(time.RFC3339), s.UserAgent, s.Address)
	}
	return nil
}

// runStaffEndSessions handles "flowd staff end-sessions --username U": every
// session of the account ends at once, each in the audit log.
func runStaffEndSessions(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("staff end-sessions", flag.ContinueOnError)
	username := fs.String("username", "", "username or e-mail address")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *username == "" {
		return errors.New("staff end-sessions: --username is required")
	}
	env, accounts, err := openStaff(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	ch, err := accounts.EndStaffSessions(ctx, *username, env.staffAudited("", staff.EndedByOperator))
	if err != nil {
		return cliError(err)
	}
	if *asJSON {
		return printJSON(stdout, map[string]any{"id": ch.Account.ID, "username": ch.Account.Username, "sessionsEnded": len(ch.Ended)})
	}
	fmt.Fprintf(stdout, "ended %d session(s) of %s\n", len(ch.Ended), ch.Account.Username)
	return nil
}

// readPassword reads one line from stdin, without its line ending.
func readPassword(stdin io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(stdin, staff.MaxPasswordLength+3)).ReadString('\n')
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
