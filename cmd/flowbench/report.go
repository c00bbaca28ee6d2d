package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"text/tabwriter"
	"time"
)

// Report is one run of flowbench.
type Report struct {
	StartedAt   time.Time `json:"started_at"`
	GoVersion   string    `json:"go_version"`
	CPUs        int       `json:"cpus"`
	Concurrency int       `json:"concurrency"`
	Results     []Result  `json:"results"`
	Notes       []string  `json:"notes,omitempty"`
}

func newReport(concurrency int) *Report {
	return &Report{StartedAt: time.Now().UTC(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Concurrency: concurrency}
}

// print writes the results as a table: throughput and latency, the ratio
// to pgbench, and CPU per request (µs) of flowd, PostgreSQL and the load
// generator, beside PostgreSQL's and pgbench's per pgbench transaction;
// and flowd's heap allocations per request.
func (r *Report) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\treq/s\tp50 ms\tp99 ms\tmax ms\terrors\tpgbench tps\tratio\tpeak RSS MiB\t"+
		"cpu µs: flowd\tpostgres\tload\t| pgbench: postgres\tclient\tflowd allocs\t")
	for _, res := range r.Results {
		pg, ratio := "-", "-"
		if res.PgbenchTPS > 0 {
			pg = fmt.Sprintf("%.0f", res.PgbenchTPS)
			ratio = fmt.Sprintf("%.2f", res.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.1f\t%d\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n",
			res.Scenario, res.RPS, res.P50ms, res.P99ms, res.MaxMs, res.Errors, pg, ratio, res.PeakRSSMiB,
			res.FlowdCPUus, res.PostgresCPUus, res.LoadCPUus, res.PgbenchPostgresCPUus, res.PgbenchClientCPUus, res.FlowdAllocs)
	}
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// save writes the report as JSON under dir, named by its start time.
func (r *Report) save(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.StartedAt.Format("20060102T150405Z")+".json")
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}
