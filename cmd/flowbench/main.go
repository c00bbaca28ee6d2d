// Command flowbench measures flowd on this machine with the database's own
// limit as the yardstick: it starts flowd against a fresh database, drives
// its HTTP API at a fixed concurrency for a fixed time per scenario, runs
// pgbench on the SQL each request executes, and reports both side by side.
//
//	make bench                       # all scenarios, 32 clients, 10 s each
//	go run ./cmd/flowbench -h        # flags
//
// It needs Linux and TEST_DATABASE_URL (make bench starts a throwaway
// cluster). Each run's JSON goes to bench/results/, which git ignores; the
// run docs/performance.md shows is kept as docs/performance-latest.json.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "flowbench:", err)
		os.Exit(1)
	}
}

// defaultOut is where runs are written unless -out says otherwise: a
// folder git ignores, so that runs are not committed one by one.
const defaultOut = "bench/results"

// options are flowbench's flags.
type options struct {
	concurrency int
	duration    time.Duration
	slices      int // turns flowd and pgbench take within duration
	scenarios   []string
	deepFlows   int
	backlog     int // deliveries webhook-backlog seeds
	tokenFlows  int // accepted consents the consent-token scenario's tokens are spread over
	ssfConsents int // accepted consents the ssf scenario withdraws
	pollSETs    int // SETs the ssf scenario's poll stream holds before it is drained
	out         string
	pprof       string   // FLOWD_PPROF_ADDR for flowd, "" for none
	keep        bool     // keep the database and the build for a look afterwards
	env         []string // extra FLOWD_* settings for flowd
	against     string   // another checkout whose flowd takes turns with this one, "" for none
	citus       bool     // TEST_DATABASE_URL is a Citus coordinator: distribute, and spread the organizations
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("flowbench", flag.ContinueOnError)
	var o options
	var scenarios string
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent clients")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "time per scenario")
	fs.IntVar(&o.slices, "slices", 5, "turns flowd and pgbench take, each, within a scenario's duration")
	fs.StringVar(&scenarios, "scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios")
	fs.IntVar(&o.deepFlows, "deep-flows", 1_000_000, "flows of the organization the deep-page scenario reads")
	fs.IntVar(&o.backlog, "backlog", 100_000, "due deliveries the webhook-backlog scenario seeds")
	fs.IntVar(&o.tokenFlows, "token-consents", 64, "accepted consents the consent-token scenario asks tokens of, in turn (1: every client asks for the same one)")
	fs.IntVar(&o.ssfConsents, "ssf-consents", 2000, "accepted consents the ssf scenario withdraws (at most, within -duration)")
	fs.IntVar(&o.pollSETs, "poll-sets", 20_000, "SETs the ssf scenario's poll stream holds before a receiver drains it")
	fs.StringVar(&o.out, "out", defaultOut, "folder for the JSON results (git ignores the default)")
	fs.StringVar(&o.pprof, "pprof", "", "let flowd serve pprof on this address (FLOWD_PPROF_ADDR), e.g. 127.0.0.1:6060")
	fs.StringVar(&o.against, "against", "", "another checkout (such as a git worktree of main) whose flowd takes turns with this one's, on the same database, for a comparison this machine's drift does not spoil")
	fs.BoolVar(&o.citus, "citus", false, "TEST_DATABASE_URL is the coordinator of a Citus cluster (make bench starts one with this flag): flowd distributes the tenant tables, the organizations are spread over the workers, and pgbench runs on the coordinator")
	fs.BoolVar(&o.keep, "keep", false, "keep the database and flowd's log afterwards")
	fs.Func("env", "an extra KEY=VALUE setting for flowd (repeatable)", func(s string) error {
		o.env = append(o.env, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.scenarios = strings.Split(scenarios, ",")
	admin := getenv("TEST_DATABASE_URL")
	if admin == "" {
		return fmt.Errorf("TEST_DATABASE_URL is not set: run `make bench`, which starts a throwaway PostgreSQL")
	}
	b, err := newBench(ctx, admin, o, stdout)
	if err != nil {
		return err
	}
	defer b.close()
	report := newReport(o.concurrency)
	for _, name := range o.scenarios {
		sc, ok := scenarioByName[name]
		if !ok {
			return fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(allScenarios, ", "))
		}
		if err := b.settle(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "scenario %s: %d clients for %s\n", name, o.concurrency, o.duration)
		res, err := sc(ctx, b)
		if err != nil {
			// What the scenarios before it measured is kept.
			if len(report.Results) > 0 {
				_ = finish(report, b, o, stdout)
			}
			return fmt.Errorf("%s: %w", name, err)
		}
		res.PeakRSSMiB = b.server.PeakRSSMiB()
		report.Results = append(report.Results, res)
		report.Results = append(report.Results, b.moreResults...)
		b.moreResults = nil
	}
	return finish(report, b, o, stdout)
}

// finish prints the run's report with its notes and writes it to o.out.
func finish(report *Report, b *bench, o options, stdout io.Writer) error {
	report.Notes = b.notes
	report.print(stdout)
	path, err := report.save(o.out)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "results written to", path)
	return nil
}
