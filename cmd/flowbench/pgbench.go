package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

var (
	tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	txLine  = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
)

// pgbenchRun is what one pgbench run measured.
type pgbenchRun struct {
	Transactions float64
	Seconds      float64       // of transactions, without connecting
	ClientCPU    time.Duration // pgbench's own
}

// TPS is transactions per second, without the time taken to connect.
func (r pgbenchRun) TPS() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return r.Transactions / r.Seconds
}

func (r pgbenchRun) add(o pgbenchRun) pgbenchRun {
	return pgbenchRun{Transactions: r.Transactions + o.Transactions, Seconds: r.Seconds + o.Seconds,
		ClientCPU: r.ClientCPU + o.ClientCPU}
}

// pgbench runs files (pgbench scripts, each optionally "@weight") against
// dbURL with vars defined (-D) at the given concurrency for d (whole
// seconds, at least one) and returns its transactions and their time: the
// database's own limit for the statements of one request. Prepared statements, as pgx's statement cache makes them.
func pgbench(ctx context.Context, bin, dbURL string, files []string, vars map[string]string, concurrency int, d time.Duration) (pgbenchRun, error) {
	threads := min(concurrency, 2)
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(concurrency), "-j", strconv.Itoa(threads),
		"-T", strconv.Itoa(max(1, int(d.Seconds())))}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	for k, v := range vars {
		args = append(args, "-D", k+"="+v)
	}
	cmd := exec.CommandContext(ctx, bin, append(args, dbURL)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return pgbenchRun{}, fmt.Errorf("pgbench: %v: %s", err, out)
	}
	tps, txs := tpsLine.FindSubmatch(out), txLine.FindSubmatch(out)
	if tps == nil || txs == nil {
		return pgbenchRun{}, fmt.Errorf("pgbench printed no tps line: %s", out)
	}
	r := pgbenchRun{ClientCPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	rate, _ := strconv.ParseFloat(string(tps[1]), 64)
	r.Transactions, _ = strconv.ParseFloat(string(txs[1]), 64)
	if rate > 0 {
		r.Seconds = r.Transactions / rate
	}
	return r, nil
}

// findPgbench looks for pgbench on PATH, then among PostgreSQL's installed versions.
func findPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("pgbench not found: install postgresql-client or PostgreSQL")
}
