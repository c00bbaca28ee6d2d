package app

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/internal/version"
)

// run runs flowd with an empty environment: no command here may need one.
func run(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = Run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// leaf is a command that runs, with the names that lead to it.
type leaf struct {
	path []string
	cmd  command.Command
}

func leaves(cmds []command.Command, path []string) []leaf {
	var out []leaf
	for _, c := range cmds {
		p := append(append([]string{}, path...), c.Name)
		if c.Run != nil {
			out = append(out, leaf{p, c})
		}
		out = append(out, leaves(c.Subcommands, p)...)
	}
	return out
}

var flagInSynopsis = regexp.MustCompile(`--[a-z][a-z-]*`)

// TestEveryCommandPrintsItsHelp walks the table: each command that runs
// prints its usage to stdout and succeeds, asked in each way, and its flags
// are the ones its usage line names.
func TestEveryCommandPrintsItsHelp(t *testing.T) {
	t.Parallel()
	all := leaves(commands(), nil)
	if len(all) < 30 {
		t.Fatalf("only %d commands in the table", len(all))
	}
	for _, l := range all {
		name := strings.Join(l.path, " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{append(l.path, "--help"), append(l.path, "-h"), append([]string{"help"}, l.path...)} {
				stdout, stderr, err := run(args...)
				if err != nil || stderr != "" {
					t.Fatalf("flowd %s: %v, exit %d, stderr %q", strings.Join(args, " "), err, command.ExitCode(err), stderr)
				}
				usage := strings.TrimSpace("Usage: flowd " + name + " " + l.cmd.Synopsis)
				if !strings.HasPrefix(stdout, usage+"\n") || !strings.Contains(stdout, strings.ToUpper(l.cmd.Summary[:1])+l.cmd.Summary[1:]) {
					t.Fatalf("flowd %s printed, without %q and its summary:\n%s", strings.Join(args, " "), usage, stdout)
				}
				for _, f := range flagInSynopsis.FindAllString(l.cmd.Synopsis, -1) {
					if !regexp.MustCompile(`(?m)^  ` + f + `\b`).MatchString(stdout) {
						t.Errorf("flowd %s: the usage line names %s, which the flags do not have:\n%s", strings.Join(args, " "), f, stdout)
					}
				}
			}
		})
	}
}

// TestHelpListsEveryCommand: flowd help, -h and --help list every command
// of the table with its usage line; each group's help lists its own.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		stdout, stderr, err := run(args...)
		if err != nil || stderr != "" {
			t.Fatalf("flowd %s: %v, stderr %q", args[0], err, stderr)
		}
		for _, l := range leaves(commands(), nil) {
			line := strings.TrimSpace("flowd " + strings.Join(l.path, " ") + " " + l.cmd.Synopsis)
			if !strings.Contains(stdout, "\n  "+line+"\n      "+l.cmd.Summary+"\n") {
				t.Errorf("flowd %s does not list %q", args[0], line)
			}
		}
	}
	for _, group := range commands() {
		if group.Run != nil {
			continue
		}
		for _, args := range [][]string{{group.Name, "--help"}, {group.Name, "-h"}, {"help", group.Name}} {
			stdout, stderr, err := run(args...)
			if err != nil || stderr != "" || !strings.HasPrefix(stdout, "Usage: flowd "+group.Name+" SUBCOMMAND") {
				t.Fatalf("flowd %s: %v, stderr %q, stdout:\n%s", strings.Join(args, " "), err, stderr, stdout)
			}
			for _, sub := range group.Subcommands {
				if !strings.Contains(stdout, "  flowd "+group.Name+" "+sub.Name) {
					t.Errorf("flowd %s does not list %s", strings.Join(args, " "), sub.Name)
				}
			}
		}
	}
}

// TestUnknownCommandsExit2NamingTheNearest: a command line flowd cannot read
// is a usage error (exit 2) that says what would have been right.
func TestUnknownCommandsExit2NamingTheNearest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sever"}, `unknown command "sever"; did you mean "serve"?`},
		{[]string{"Serve"}, `did you mean "serve"?`},
		{[]string{"client"}, `did you mean "clients"?`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"; the choices are serve, migrate, version`},
		{[]string{"help", "stafff"}, `unknown command "stafff"; did you mean "staff"?`},
		{[]string{"clients", "craete"}, `clients: unknown subcommand "craete"; did you mean "create"?`},
		{[]string{"clients", "rot"}, `did you mean "rotate"?`},
		{[]string{"keys", "rotate-data"}, `did you mean "rotate-data-key" or "rotate"?`},
		{[]string{"staff", "promote"}, `staff: unknown subcommand "promote"; the choices are create, disable`},
		{[]string{"help", "clients", "nope"}, `clients: unknown subcommand "nope"`},
		{[]string{"staff", "create", "--bogus"}, "staff create: flag provided but not defined: --bogus (see flowd staff create --help)"},
		{[]string{"version", "--jsn"}, "version: flag provided but not defined: --jsn; did you mean --json? (see flowd version --help)"},
		{[]string{"clients", "list", "-orgg=x"}, `flag provided but not defined: -orgg; did you mean --org?`},
		{[]string{"clients", "list"}, "clients list: --org is required"},
		{[]string{"staff", "disable"}, "staff disable: --username is required"},
		{[]string{"keys", "rotate-data-key", "--batch", "0"}, "--batch must be from 1 to 10000"},
		{[]string{"version", "extra"}, `version: unexpected argument "extra"`},
		{[]string{"clients", "rotate", "a", "b"}, `clients rotate: unexpected argument "b"`},
		{[]string{"clients", "rotate", "a", "--client-id", "b"}, "name two clients"},
		{[]string{"clients"}, "clients: give a subcommand: create, list, rotate"},
		{nil, "no command given"},
	}
	for _, tt := range tests {
		stdout, _, err := run(tt.args...)
		if command.ExitCode(err) != 2 || !strings.Contains(err.Error(), tt.want) || stdout != "" {
			t.Errorf("flowd %s: exit %d, %v, stdout %q; want exit 2 and %q", strings.Join(tt.args, " "), command.ExitCode(err), err, stdout, tt.want)
		}
	}
	// Without a command, the usage goes where the error goes.
	if _, stderr, _ := run(); !strings.Contains(stderr, "\n  flowd serve") {
		t.Errorf("flowd with no command: stderr does not show the commands:\n%s", stderr)
	}
	if _, stderr, _ := run("clients"); !strings.Contains(stderr, "\n  flowd clients create") {
		t.Errorf("flowd clients: stderr does not show the subcommands:\n%s", stderr)
	}
	if command.ExitCode(nil) != 0 || command.ExitCode(context.Canceled) != 1 {
		t.Errorf("exit codes of success and failure: %d, %d", command.ExitCode(nil), command.ExitCode(context.Canceled))
	}
}

func TestVersionPrintsVersionCommitAndBuildTime(t *testing.T) {
	t.Parallel()
	want := version.Get()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		stdout, _, err := run(args...)
		if err != nil {
			t.Fatalf("flowd %s: %v", args[0], err)
		}
		if !strings.HasPrefix(stdout, "flowd "+want.Version+"\n") || !strings.Contains(stdout, "\n  commit  ") ||
			!strings.Contains(stdout, "\n  built   ") || !strings.Contains(stdout, want.GoVersion) {
			t.Fatalf("flowd %s:\n%s", args[0], stdout)
		}
	}
	stdout, _, err := run("version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("version --json is not one JSON object: %q (%v)", stdout, err)
	}
	for _, key := range []string{"version", "commit", "commitTime", "modified", "buildTime", "goVersion", "platform"} {
		if _, ok := got[key]; !ok {
			t.Errorf("version --json lacks %q: %s", key, stdout)
		}
	}
	if got["version"] != want.Version || got["goVersion"] != want.GoVersion {
		t.Errorf("version --json: %s, want version %q", stdout, want.Version)
	}
}
