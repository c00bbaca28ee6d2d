package admin

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/staff"
)

// staffFlags starts the flag set of a staff command: each names the account
// with --username and prints JSON with --json.
func staffFlags(name string) (fs *flag.FlagSet, username *string, asJSON *bool) {
	fs = flag.NewFlagSet("staff "+name, flag.ContinueOnError)
	username = fs.String("username", "", "username or e-mail address (required)")
	asJSON = fs.Bool("json", false, "print one JSON object")
	return fs, username, asJSON
}

// staffPassword checks that a staff command names the account, then reads
// its password from stdin, which --password-stdin must say: passwords never
// go on the command line.
func staffPassword(fs *flag.FlagSet, username string, passwordStdin bool, stdin io.Reader) (string, error) {
	if username == "" {
		return "", command.Usagef("%s: --username is required", fs.Name())
	}
	if !passwordStdin {
		return "", command.Usagef("%s: --password-stdin is required (passwords never go on the command line)", fs.Name())
	}
	return readPassword(stdin)
}

// runStaffCreate handles "flowd staff create": a console staff account.
func runStaffCreate(ctx context.Context, args []string, sys command.Env) error {
	fs, username, asJSON := staffFlags("create")
	org := fs.String("org", "", "organization id")
	role := fs.String("role", "", "admin or viewer")
	name := fs.String("name", "", "the person's name (optional)")
	passwordStdin := fs.Bool("password-stdin", false, "read the password from standard input")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	password, err := staffPassword(fs, *username, *passwordStdin, sys.Stdin)
	if err != nil {
		return err
	}
	env, accounts, err := openStaff(ctx, sys)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	var ch staff.Change
	ch.Account, err = accounts.CreateStaff(ctx, staff.NewAccount{
		OrganizationID: strings.TrimSpace(*org), Username: *username, Name: strings.TrimSpace(*name),
		Role: staff.Role(*role), Password: password,
	})
	if err != nil {
		return cliError(err)
	}
	return printStaffChange(sys.Stdout, ch, *asJSON, nil, "created staff account %s (%s) in organization %s\n")
}

// runStaffDisable handles "flowd staff disable": the account can no longer
// sign in, and its sessions end.
func runStaffDisable(ctx context.Context, args []string, sys command.Env) error {
	c, err := openStaffCommand(ctx, "disable", args, sys, nil)
	if err != nil {
		return err
	}
	defer c.close()
	ch, err := c.accounts.DisableStaff(ctx, c.username, c.staffAudited(identity.AuditStaffDisable, staff.EndedByDisable))
	if err != nil {
		return cliError(err)
	}
	return printStaffChange(sys.Stdout, ch, c.asJSON, map[string]any{"disabled": true}, "disabled staff account %s (%s) of organization %s\n")
}

// runStaffResetPassword handles "flowd staff reset-password": a new
// password, read from stdin; the account's sessions end.
func runStaffResetPassword(ctx context.Context, args []string, sys command.Env) error {
	fs, username, asJSON := staffFlags("reset-password")
	passwordStdin := fs.Bool("password-stdin", false, "read the password from standard input")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	password, err := staffPassword(fs, *username, *passwordStdin, sys.Stdin)
	if err != nil {
		return err
	}
	env, accounts, err := openStaff(ctx, sys)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	ch, err := accounts.ResetStaffPassword(ctx, *username, password, env.staffAudited(identity.AuditStaffPasswordReset, staff.EndedByPasswordReset))
	if err != nil {
		return cliError(err)
	}
	return printStaffChange(sys.Stdout, ch, *asJSON, map[string]any{}, "set a new password for staff account %s (%s) of organization %s\n")
}

// runStaffSetRole handles "flowd staff set-role": another role; the
// account's sessions end.
func runStaffSetRole(ctx context.Context, args []string, sys command.Env) error {
	var role *string
	c, err := openStaffCommand(ctx, "set-role", args, sys, func(fs *flag.FlagSet) { role = fs.String("role", "", "admin or viewer") })
	if err != nil {
		return err
	}
	defer c.close()
	ch, err := c.accounts.SetStaffRole(ctx, c.username, staff.Role(*role), c.staffAudited(identity.AuditStaffRoleChange, staff.EndedByRoleChange))
	if err != nil {
		return cliError(err)
	}
	return printStaffChange(sys.Stdout, ch, c.asJSON, map[string]any{}, "staff account %s now has the role %s in organization %s\n")
}

// runStaffDelete handles "flowd staff delete": no account any more; its
// sessions end.
func runStaffDelete(ctx context.Context, args []string, sys command.Env) error {
	c, err := openStaffCommand(ctx, "delete", args, sys, nil)
	if err != nil {
		return err
	}
	defer c.close()
	ch, err := c.accounts.DeleteStaff(ctx, c.username, c.staffAudited(identity.AuditStaffDelete, staff.EndedByDelete))
	if err != nil {
		return cliError(err)
	}
	return printStaffChange(sys.Stdout, ch, c.asJSON, map[string]any{"deleted": true}, "deleted staff account %s (%s) of organization %s\n")
}

// printStaffChange prints what a staff command did: the summary (of the
// account's username, role and organization) and the sessions it ended, or
// with asJSON the account and, unless ended is nil (an account just made),
// what ended adds and the number of sessions ended.
func printStaffChange(stdout io.Writer, ch staff.Change, asJSON bool, ended map[string]any, summary string) error {
	if asJSON {
		out := map[string]any{"id": ch.Account.ID, "username": ch.Account.Username, "role": ch.Account.Role}
		if ended != nil {
			for k, v := range ended {
				out[k] = v
			}
			out["sessionsEnded"] = len(ch.Ended)
		}
		return command.PrintJSON(stdout, out)
	}
	fmt.Fprintf(stdout, summary, ch.Account.Username, ch.Account.Role, ch.Account.OrganizationID)
	if len(ch.Ended) > 0 {
		fmt.Fprintf(stdout, "ended %d session(s)\n", len(ch.Ended))
	}
	return nil
}

// staffCommand is a staff command that acts on one existing account, named
// by --username.
type staffCommand struct {
	*adminEnv
	accounts *staff.AccountService
	username string
	asJSON   bool
}

// openStaffCommand parses a staff command's flags (--username, --json and
// those more adds), checks that they name the account, and opens the
// accounts.
func openStaffCommand(ctx context.Context, name string, args []string, sys command.Env, more func(*flag.FlagSet)) (*staffCommand, error) {
	fs, username, asJSON := staffFlags(name)
	if more != nil {
		more(fs)
	}
	if err := command.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	if *username == "" {
		return nil, command.Usagef("staff %s: --username is required", name)
	}
	env, accounts, err := openStaff(ctx, sys)
	if err != nil {
		return nil, err
	}
	return &staffCommand{adminEnv: env, accounts: accounts, username: *username, asJSON: *asJSON}, nil
}

func (c *staffCommand) close() { c.pool.Close() }

// openStaff opens the database and the staff accounts of an admin command.
func openStaff(ctx context.Context, sys command.Env) (*adminEnv, *staff.AccountService, error) {
	env, err := openAdmin(ctx, sys, config.Need{})
	if err != nil {
		return nil, nil, err
	}
	accounts, err := staff.NewAccounts(env.pool, env.Orgs, staff.Config{PasswordParams: env.cfg.PasswordHash})
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
			if err := env.Audit.RecordAuditTx(ctx, tx, e); err != nil {
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
func runStaffSessions(ctx context.Context, args []string, sys command.Env) error {
	c, err := openStaffCommand(ctx, "sessions", args, sys, nil)
	if err != nil {
		return err
	}
	defer c.close()
	a, all, err := c.accounts.StaffSessions(ctx, c.username)
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
	if c.asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"id": a.ID, "username": a.Username, "sessions": live})
	}
	fmt.Fprintf(sys.Stdout, "%d live session(s) of %s\n", len(live), a.Username)
	for _, s := range live {
		fmt.Fprintf(sys.Stdout, "%s  %-8s  started %s  last seen %s  %s  %s\n", s.ID, s.Kind, s.StartedAt.Format(time.RFC3339),
			s.LastSeenAt.Format(time.RFC3339), s.UserAgent, s.Address)
	}
	return nil
}

// runStaffEndSessions handles "flowd staff end-sessions --username U": every
// session of the account ends at once, each in the audit log.
func runStaffEndSessions(ctx context.Context, args []string, sys command.Env) error {
	c, err := openStaffCommand(ctx, "end-sessions", args, sys, nil)
	if err != nil {
		return err
	}
	defer c.close()
	ch, err := c.accounts.EndStaffSessions(ctx, c.username, c.staffAudited("", staff.EndedByOperator))
	if err != nil {
		return cliError(err)
	}
	if c.asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"id": ch.Account.ID, "username": ch.Account.Username, "sessionsEnded": len(ch.Ended)})
	}
	fmt.Fprintf(sys.Stdout, "ended %d session(s) of %s\n", len(ch.Ended), ch.Account.Username)
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
