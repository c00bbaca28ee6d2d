package app

import (
	"context"
	"flag"
	"fmt"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/internal/version"
)

// runVersion handles "flowd version [--json]" and "flowd --version": the
// version, the commit and when the binary was built.
func runVersion(_ context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	v := version.Get()
	if *asJSON {
		orNull := func(s string) any {
			if s == "" {
				return nil
			}
			return s
		}
		return command.PrintJSON(sys.Stdout, map[string]any{"version": v.Version, "commit": orNull(v.Commit), "commitTime": orNull(v.CommitTime),
			"modified": v.Modified, "buildTime": orNull(v.BuildTime), "goVersion": v.GoVersion, "platform": v.Platform})
	}
	orUnknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	commit := orUnknown(v.Commit)
	if v.Modified {
		commit += " (with changes not committed)"
	}
	if v.CommitTime != "" {
		commit += ", of " + v.CommitTime
	}
	fmt.Fprintf(sys.Stdout, "flowd %s\n  commit  %s\n  built   %s\n  go      %s %s\n", v.Version, commit, orUnknown(v.BuildTime), v.GoVersion, v.Platform)
	return nil
}
