// Package command is flowd's command line: a table of commands and their
// subcommands, each with its own flags, that both runs them and prints their
// usage; -h and --help print a command's usage and succeed, and a command
// line that cannot be read exits 2 with a hint.
package command

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// A Command is one of flowd's commands: either it runs, or it groups
// subcommands (orgs, clients, …), one level deep.
type Command struct {
	Name     string
	Synopsis string // what follows the name in its usage line
	Summary  string // one line for the lists of commands
	Detail   string // more, for the command's own help
	// run handles the command; it parses its arguments with ParseFlags or
	// ParseFlagsAndName, which answer -h and --help.
	Run         RunFunc
	Subcommands []Command
}

// RunFunc is a command's function, given the arguments after its name and
// what it gets of the process it runs in.
type RunFunc func(ctx context.Context, args []string, sys Env) error

// Env is what a command gets of the process it runs in: the environment's
// variables (DATABASE_URL, FLOWD_*) and the standard streams.
type Env struct {
	Getenv         func(string) string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// UsageError is a command line flowd cannot read: an unknown command, a
// flag it does not know. Shells and Go's flag package exit 2 on those.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef makes a *UsageError.
func Usagef(format string, a ...any) error { return &UsageError{msg: fmt.Sprintf(format, a...)} }

// ExitCode is the status flowd exits with after Run returned err: 0 when it
// succeeded, 2 when the command line was wrong, 1 when the command failed.
func ExitCode(err error) int {
	var usage *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		return 2
	default:
		return 1
	}
}

// helpRequest is what ParseFlags returns when asked for -h or --help: the
// dispatcher prints the command's usage, with these flags, to stdout.
type helpRequest struct{ flags *flag.FlagSet }

func (h *helpRequest) Error() string { return "help requested" }

// IsHelpFlag reports whether arg asks for help, as the flag package reads it.
func IsHelpFlag(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// Dispatch runs c with args; path is the names that led to it.
func (c Command) Dispatch(ctx context.Context, path, args []string, sys Env) error {
	stdout, stderr := sys.Stdout, sys.Stderr
	if c.Run != nil {
		err := c.Run(ctx, args, sys)
		var help *helpRequest
		if errors.As(err, &help) {
			c.writeUsage(stdout, path, help.flags)
			return nil
		}
		return err
	}
	where := strings.Join(path, " ")
	if len(args) == 0 {
		c.writeUsage(stderr, path, nil)
		if len(path) == 0 {
			return Usagef("no command given")
		}
		return Usagef("%s: give a subcommand: %s", where, strings.Join(c.names(), ", "))
	}
	name := args[0]
	switch {
	case IsHelpFlag(name):
		c.writeUsage(stdout, path, nil)
		return nil
	}
	for _, sub := range c.Subcommands {
		if sub.Name == name {
			return sub.Dispatch(ctx, append(slices.Clip(path), name), args[1:], sys)
		}
	}
	if len(path) == 0 {
		return Usagef("unknown command %q; %s (flowd help lists every Command)", name, c.hint(name))
	}
	return Usagef("%s: unknown subcommand %q; %s (flowd %s --help lists them)", where, name, c.hint(name), where)
}

// names are the names of c's subcommands.
func (c Command) names() []string {
	names := make([]string, len(c.Subcommands))
	for i, sub := range c.Subcommands {
		names[i] = sub.Name
	}
	return names
}

// hint names the subcommands of c nearest to the unknown name, or all of
// them when none is near.
func (c Command) hint(name string) string {
	near := nearest(name, c.names())
	if len(near) == 0 {
		return "the choices are " + strings.Join(c.names(), ", ")
	}
	for i, n := range near {
		near[i] = fmt.Sprintf("%q", n)
	}
	return "did you mean " + strings.Join(near, " or ") + "?"
}

// nearest are the names within two edits of name, or that begin with it or
// with which it begins, closest first.
func nearest(name string, names []string) []string {
	type candidate struct {
		name     string
		distance int
	}
	name = strings.ToLower(name)
	var found []candidate
	for _, n := range names {
		d := editDistance(name, n)
		if d <= 2 || (len(name) >= 2 && (strings.HasPrefix(n, name) || strings.HasPrefix(name, n))) {
			found = append(found, candidate{n, d})
		}
	}
	slices.SortStableFunc(found, func(a, b candidate) int { return a.distance - b.distance })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.name
	}
	return out
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// writeUsage prints c's usage: for a group, its subcommands (at the top,
// every command and subcommand); for a command that runs, its synopsis,
// detail and flags.
func (c Command) writeUsage(w io.Writer, path []string, flags *flag.FlagSet) {
	full := strings.Join(append([]string{"flowd"}, path...), " ")
	if c.Run != nil {
		fmt.Fprintf(w, "Usage: %s\n\n%s.\n", strings.TrimSpace(full+" "+c.Synopsis), capitalize(c.Summary))
		if c.Detail != "" {
			fmt.Fprintf(w, "%s\n", c.Detail)
		}
		writeFlags(w, flags)
		fmt.Fprint(w, settingsNote)
		return
	}
	if len(path) == 0 {
		fmt.Fprintf(w, "flowd — %s\n\nUsage: flowd COMMAND [SUBCOMMAND] [ARGUMENTS] [FLAGS]\n\nCommands:\n", c.Summary)
	} else {
		fmt.Fprintf(w, "Usage: %s SUBCOMMAND [ARGUMENTS] [FLAGS]\n\n%s.\n", full, capitalize(c.Summary))
		if c.Detail != "" {
			fmt.Fprintf(w, "%s\n", c.Detail)
		}
		fmt.Fprint(w, "\nSubcommands:\n")
	}
	c.writeList(w, path)
	if len(path) == 0 {
		fmt.Fprint(w, "\n`flowd help COMMAND [SUBCOMMAND]` or `flowd COMMAND [SUBCOMMAND] --help` tells more of one.")
	} else {
		fmt.Fprintf(w, "\n`flowd %s SUBCOMMAND --help` tells more of one.", strings.Join(path, " "))
	}
	fmt.Fprint(w, settingsNote)
}

const settingsNote = "\nSettings come from the environment (DATABASE_URL, FLOWD_*); see docs/configuration.md.\n"

// writeList lists every command below c that runs, each with its synopsis
// and, below it, its summary.
func (c Command) writeList(w io.Writer, path []string) {
	for _, sub := range c.Subcommands {
		subPath := append(slices.Clip(path), sub.Name)
		if sub.Run == nil {
			sub.writeList(w, subPath)
			continue
		}
		fmt.Fprintf(w, "  %s\n      %s\n", strings.TrimSpace("flowd "+strings.Join(subPath, " ")+" "+sub.Synopsis), sub.Summary)
	}
}

// writeFlags lists the flags of fs the way the usage lines spell them, with
// two dashes.
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	if fs == nil {
		return
	}
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprint(w, "\nFlags:\n")
			first = false
		}
		kind, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if kind != "" {
			name += " " + kind
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		if len(name) <= 20 {
			fmt.Fprintf(w, "  %-20s  %s\n", name, usage)
		} else {
			fmt.Fprintf(w, "  %s\n  %-20s  %s\n", name, "", usage)
		}
	})
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// ParseFlags parses a command's flags; it takes no other argument. On -h or
// --help it returns a *helpRequest, on a flag it cannot read a *UsageError.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return Usagef("%s: unexpected argument %q (see flowd %s --help)", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// ParseFlagsAndName parses a command's flags and its one argument, which
// may come before, between or after them.
func ParseFlagsAndName(fs *flag.FlagSet, args []string) (string, error) {
	var name string
	for {
		if err := parse(fs, args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			return name, nil
		}
		if name != "" {
			return "", Usagef("%s: unexpected argument %q (see flowd %s --help)", fs.Name(), fs.Arg(0), fs.Name())
		}
		name, args = fs.Arg(0), fs.Args()[1:]
	}
}

// parse is fs.Parse with its errors made ours: the flag package prints
// nothing, help is a *helpRequest and anything else a *UsageError of one line.
func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return &helpRequest{flags: fs}
	default:
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return unknownFlag(fs, args, name)
		}
		return Usagef("%s: %v (see flowd %s --help)", fs.Name(), err, fs.Name())
	}
}

// unknownFlag is the usage error of a flag fs does not define, named as it
// was written on the command line (the flag package drops a dash of
// --name), with the flags it may have meant.
func unknownFlag(fs *flag.FlagSet, args []string, name string) error {
	written := "-" + name
	for _, a := range args {
		if a == "--" {
			break
		}
		if flagName, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); flagName == name && strings.HasPrefix(a, "-") {
			written, _, _ = strings.Cut(a, "=")
			break
		}
	}
	var defined []string
	fs.VisitAll(func(f *flag.Flag) { defined = append(defined, f.Name) })
	hint := ""
	if near := nearest(name, defined); len(near) > 0 {
		for i, n := range near {
			near[i] = "--" + n
		}
		hint = "; did you mean " + strings.Join(near, " or ") + "?"
	}
	return Usagef("%s: flag provided but not defined: %s%s (see flowd %s --help)", fs.Name(), written, hint, fs.Name())
}

// PrintJSON writes v as exactly one JSON object on its own line.
func PrintJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// Help is what a command returns to have its usage, with the flags of fs,
// printed to stdout.
func Help(fs *flag.FlagSet) error { return &helpRequest{flags: fs} }
