package admin

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/modules/erasure"
)

// maxExport bounds what reapply reads: a million tombstones.
const maxExport = 2 << 30

// openErasures builds the erasure module as serve does, for the CLI.
func openErasures(ctx context.Context, sys command.Env) (*adminEnv, *erasure.Module, error) {
	env, err := openAdmin(ctx, sys, config.Need{Secrets: true})
	if err != nil {
		return nil, nil, err
	}
	m, err := env.modules()
	if err != nil {
		env.pool.Close()
		return nil, nil, err
	}
	return env, m.Erasures, nil
}

// runErasuresExport handles "flowd erasures export [--out FILE]": every
// erasure's tombstone, one JSON object a line, to keep apart from the
// database's backups.
func runErasuresExport(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("erasures export", flag.ContinueOnError)
	out := fs.String("out", "", "the file to write (made afresh, mode 0600); default: stdout")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	env, m, err := openErasures(ctx, sys)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	var buf bytes.Buffer
	n, err := m.Export(ctx, &buf)
	if err != nil {
		return fmt.Errorf("erasures export: %w", err)
	}
	if *out == "" {
		_, err = sys.Stdout.Write(buf.Bytes())
		return err
	}
	// Written beside the file and renamed, so that a failure leaves the
	// previous export whole.
	tmp := filepath.Clean(*out) + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("erasures export: %w", err)
	}
	if err := os.Rename(tmp, filepath.Clean(*out)); err != nil {
		return fmt.Errorf("erasures export: %w", err)
	}
	fmt.Fprintf(sys.Stderr, "%d erasures written to %s\n", n, *out)
	return nil
}

// runErasuresReapply handles "flowd erasures reapply FILE": after a
// restore, it erases again everyone of the export whose flows the database
// still holds. A file with any line that is not a tombstone changes
// nothing.
func runErasuresReapply(ctx context.Context, args []string, sys command.Env) error {
	fs := flag.NewFlagSet("erasures reapply", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object at the end")
	file, err := command.ParseFlagsAndName(fs, args)
	if err != nil {
		return err
	}
	if file == "" {
		return errors.New("erasures reapply: name the export's file (- for stdin)")
	}
	raw, err := readInput(file, sys.Stdin, maxExport)
	if err != nil {
		return fmt.Errorf("erasures reapply: %w", err)
	}
	tombstones, err := erasure.ReadTombstones(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("erasures reapply: %w", err)
	}
	env, m, err := openErasures(ctx, sys)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	done, err := m.Reapply(ctx, tombstones)
	type line struct {
		ErasureID      string `json:"erasureId"`
		OrganizationID string `json:"organizationId"`
		Flows          int    `json:"flows"`
		Restored       bool   `json:"tombstoneRestored"`
	}
	lines := make([]line, len(done))
	flowsErased := 0
	for i, r := range done {
		lines[i] = line{ErasureID: r.Tombstone.ErasureID, OrganizationID: r.Tombstone.OrganizationID, Flows: r.Flows, Restored: r.Restored}
		flowsErased += r.Flows
		if *asJSON {
			continue
		}
		what := "already erased"
		if r.Flows > 0 {
			what = fmt.Sprintf("erased again: %d flows", r.Flows)
		}
		if r.Restored {
			what += ", tombstone restored"
		}
		fmt.Fprintf(sys.Stdout, "erasure %s of organization %s: %s\n", r.Tombstone.ErasureID, r.Tombstone.OrganizationID, what)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return command.PrintJSON(sys.Stdout, map[string]any{"erasures": lines, "flowsErased": flowsErased})
	}
	fmt.Fprintf(sys.Stdout, "%d erasures read, %d flows erased again\n", len(done), flowsErased)
	return nil
}
