package admin

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/flowd/flowd/cmd/flowd/internal/command"
	"github.com/flowd/flowd/cmd/flowd/internal/wiring"
	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/nationalid"
	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/rekey"
)

// runFlowsReindex handles "flowd flows reindex": it fills in the blind index
// of every person's key, and of every flow not yet under one, made before
// flows had an index, indexed under a previous FLOWD_KEY_ENCRYPTION_KEY or
// under an earlier reading of the national id format (moving the flows of a
// key two people shared under their own), printing its progress after each
// batch. Each batch commits on its own, so
// the command is idempotent and resumable: run it again after an
// interruption and it finds only what is left.
func runFlowsReindex(ctx context.Context, args []string, sys command.Env) error {
	job, err := openBatchJob(ctx, "flows reindex", "flows indexed per transaction", args, sys)
	if err != nil {
		return err
	}
	defer job.close()
	format := job.env.cfg.NationalIDs(nil)
	index := nationalid.NewBlindIndex(job.env.cfg.KeyEncryptionKey, format)
	r := rekey.NewReindexer(job.env.pool, job.sealer, index, format)
	done, err := job.run(ctx, sys.Stdout, r.Remaining, r.ReindexBatch,
		"%d people's keys and older flows to index under key version "+index.Version()+"\n", "indexed %d of %d\n")
	if err != nil || job.asJSON {
		return job.answer(sys.Stdout, err, map[string]any{"keyVersion": index.Version(), "indexed": done})
	}
	fmt.Fprintf(sys.Stdout, "Every person's key and flow is indexed under key version %s (indexed now: %d).\n", index.Version(), done)
	return nil
}

// runFlowsRekey handles "flowd flows rekey": it moves the personal data of
// every flow made before per-person keys under the key of its person in its
// organization (made as a create makes it), printing its progress after
// each batch, so that erasing a person reaches those flows too. Each batch
// commits on its own, so the command is idempotent and resumable, and safe
// beside serving instances: run it again after an interruption, however
// abrupt, and it finds only what is left.
func runFlowsRekey(ctx context.Context, args []string, sys command.Env) error {
	job, err := openBatchJob(ctx, "flows rekey", "flows moved per transaction", args, sys)
	if err != nil {
		return err
	}
	defer job.close()
	format := job.env.cfg.NationalIDs(nil)
	r := rekey.NewRekeyer(job.env.pool, job.sealer, nationalid.NewBlindIndex(job.env.cfg.KeyEncryptionKey, format), format)
	done, err := job.run(ctx, sys.Stdout, r.Remaining, r.RekeyBatch,
		"%d flows and uses to move under per-person keys\n", "moved %d of %d flows and uses\n")
	if err != nil || job.asJSON {
		return job.answer(sys.Stdout, err, map[string]any{"rekeyed": done})
	}
	fmt.Fprintf(sys.Stdout, "Every flow, and every use's text, is sealed under its person's key (moved now: %d).\n", done)
	return nil
}

// batchJob is an admin command that works through the flows in batches,
// each committing on its own: its flags, its database and its sealer.
type batchJob struct {
	name   string
	batch  int
	asJSON bool
	env    *adminEnv
	sealer *pii.Sealer
}

// openBatchJob parses a batch command's flags (--batch, --json) and opens
// the database and the data keys.
func openBatchJob(ctx context.Context, name, batchUsage string, args []string, sys command.Env) (*batchJob, error) {
	j := &batchJob{name: name}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.IntVar(&j.batch, "batch", 1000, batchUsage)
	fs.BoolVar(&j.asJSON, "json", false, "print one JSON object at the end instead of progress")
	if err := command.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	if j.batch < 1 || j.batch > 10000 {
		return nil, command.Usagef("%s: --batch must be from 1 to 10000", name)
	}
	env, err := openAdmin(ctx, sys, config.Need{Secrets: true})
	if err != nil {
		return nil, err
	}
	sealer, err := wiring.NewSealer(env.cfg)
	if err != nil {
		env.pool.Close()
		return nil, err
	}
	j.env, j.sealer = env, sealer
	return j, nil
}

func (j *batchJob) close() { j.env.pool.Close() }

// run counts what is left, then runs batches until one finds nothing,
// printing todo (with the count) first and progress (done, of how many)
// after each batch unless --json; it returns how many rows it did.
func (j *batchJob) run(ctx context.Context, stdout io.Writer, remaining func(context.Context) (int64, error),
	batch func(context.Context, int) (int, error), todo, progress string) (int64, error) {
	left, err := remaining(ctx)
	if err != nil {
		return 0, err
	}
	if !j.asJSON {
		fmt.Fprintf(stdout, todo, left)
	}
	var done int64
	for {
		n, err := batch(ctx, j.batch)
		if err != nil {
			return done, err
		}
		if n == 0 {
			return done, nil
		}
		done += int64(n)
		if !j.asJSON {
			fmt.Fprintf(stdout, progress, done, max(left, done))
		}
	}
}

// answer is the command's error, named by the command, or its JSON answer.
func (j *batchJob) answer(stdout io.Writer, err error, answer map[string]any) error {
	if err != nil {
		return fmt.Errorf("%s: %w", j.name, err)
	}
	return command.PrintJSON(stdout, answer)
}
