package admin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/flowd/flowd/internal/app/command"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/nationalid"
	"github.com/flowd/flowd/modules/flows/rekey"
)

// runFlowsReindex handles "flowd flows reindex": it fills in the blind index
// of every person's key, and of every flow not yet under one, made before
// flows had an index or indexed under a previous FLOWD_KEY_ENCRYPTION_KEY,
// printing its progress after each batch. Each batch commits on its own, so the command is idempotent and
// resumable: run it again after an interruption and it finds only what is
// left.
func runFlowsReindex(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flows reindex", flag.ContinueOnError)
	batch := fs.Int("batch", 1000, "flows indexed per transaction")
	asJSON := fs.Bool("json", false, "print one JSON object at the end instead of progress")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *batch < 1 || *batch > 10000 {
		return errors.New("flows reindex: --batch must be from 1 to 10000")
	}
	env, err := openAdmin(ctx, getenv, config.Need{Secrets: true}, stderr)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	sealer, err := pii.New(env.cfg.DataKey, env.cfg.DataKeyPrevious...)
	if err != nil {
		return err
	}
	index := nationalid.NewBlindIndex(env.cfg.KeyEncryptionKey)
	r := rekey.NewReindexer(env.pool, sealer, index)
	todo, err := r.Remaining(ctx)
	if err != nil {
		return fmt.Errorf("flows reindex: %w", err)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%d people's keys and older flows to index under key version %s\n", todo, index.Version())
	}
	var done int64
	for {
		n, err := r.ReindexBatch(ctx, *batch)
		if err != nil {
			return fmt.Errorf("flows reindex: %w", err)
		}
		if n == 0 {
			break
		}
		done += int64(n)
		if !*asJSON {
			fmt.Fprintf(stdout, "indexed %d of %d\n", done, max(todo, done))
		}
	}
	if *asJSON {
		return command.PrintJSON(stdout, map[string]any{"keyVersion": index.Version(), "indexed": done})
	}
	fmt.Fprintf(stdout, "Every person's key and flow is indexed under key version %s (indexed now: %d).\n", index.Version(), done)
	return nil
}

// runFlowsRekey handles "flowd flows rekey": it moves the personal data of
// every flow made before per-person keys under the key of its person in its
// organization (made as a create makes it), printing its progress after
// each batch, so that erasing a person reaches those flows too. Each batch
// commits on its own, so the command is idempotent and resumable, and safe
// beside serving instances: run it again after an interruption, however
// abrupt, and it finds only what is left.
func runFlowsRekey(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flows rekey", flag.ContinueOnError)
	batch := fs.Int("batch", 1000, "flows moved per transaction")
	asJSON := fs.Bool("json", false, "print one JSON object at the end instead of progress")
	if err := command.ParseFlags(fs, args); err != nil {
		return err
	}
	if *batch < 1 || *batch > 10000 {
		return errors.New("flows rekey: --batch must be from 1 to 10000")
	}
	env, err := openAdmin(ctx, getenv, config.Need{Secrets: true}, stderr)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	sealer, err := pii.New(env.cfg.DataKey, env.cfg.DataKeyPrevious...)
	if err != nil {
		return err
	}
	r := rekey.NewRekeyer(env.pool, sealer, nationalid.NewBlindIndex(env.cfg.KeyEncryptionKey))
	todo, err := r.Remaining(ctx)
	if err != nil {
		return fmt.Errorf("flows rekey: %w", err)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%d flows to move under per-person keys\n", todo)
	}
	var done int64
	for {
		n, err := r.RekeyBatch(ctx, *batch)
		if err != nil {
			return fmt.Errorf("flows rekey: %w", err)
		}
		if n == 0 {
			break
		}
		done += int64(n)
		if !*asJSON {
			fmt.Fprintf(stdout, "moved %d of %d flows\n", done, max(todo, done))
		}
	}
	if *asJSON {
		return command.PrintJSON(stdout, map[string]any{"rekeyed": done})
	}
	fmt.Fprintf(stdout, "Every flow is sealed under its person's key (moved now: %d).\n", done)
	return nil
}
