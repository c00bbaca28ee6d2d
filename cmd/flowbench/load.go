package main

import (
	"context"
	"slices"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
)

// Result is what one scenario measured.
type Result struct {
	Scenario    string  `json:"scenario"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	RPS         float64 `json:"rps"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	PgbenchTPS  float64 `json:"pgbench_tps,omitempty"`
	Ratio       float64 `json:"ratio_to_pgbench,omitempty"`
	PeakRSSMiB  float64 `json:"peak_rss_mib"`
	FirstError  string  `json:"first_error,omitempty"`
	// The webhook scenario's own figures: RPS is its deliveries per second.
	CreatesPerSec    float64 `json:"creates_per_sec,omitempty"`
	DeliveriesPerSec float64 `json:"deliveries_per_sec,omitempty"`
	DrainSeconds     float64 `json:"drain_seconds,omitempty"`
	// ssf's: the withdrawals whose SETs RPS counts the deliveries of.
	WithdrawalsPerSec float64 `json:"withdrawals_per_sec,omitempty"`
	// CPU per request, in µs, during the HTTP run: flowd's, PostgreSQL's and
	// the load generator's; and during pgbench's run, PostgreSQL's and
	// pgbench's per transaction.
	FlowdCPUus           float64 `json:"flowd_cpu_us_per_request,omitempty"`
	PostgresCPUus        float64 `json:"postgres_cpu_us_per_request,omitempty"`
	LoadCPUus            float64 `json:"load_cpu_us_per_request,omitempty"`
	PgbenchPostgresCPUus float64 `json:"pgbench_postgres_cpu_us_per_tx,omitempty"`
	PgbenchClientCPUus   float64 `json:"pgbench_client_cpu_us_per_tx,omitempty"`
	// FlowdAllocs is flowd's heap allocations per request, from its
	// go_memstats_mallocs_total: what its garbage collector has to follow.
	FlowdAllocs float64 `json:"flowd_allocs_per_request,omitempty"`
	// list-deep's reference: the first page, in turns with the deep one.
	FirstPageRPS   float64 `json:"first_page_rps,omitempty"`
	FirstPageP50ms float64 `json:"first_page_p50_ms,omitempty"`
	// person-page's reference: a retrieve, in turns with the page.
	RetrieveRPS   float64 `json:"retrieve_rps,omitempty"`
	RetrieveP50ms float64 `json:"retrieve_p50_ms,omitempty"`
	// person-page's other reference: a create, which writes and commits as
	// each view of the page does.
	CreateRPS   float64 `json:"create_rps,omitempty"`
	CreateP50ms float64 `json:"create_p50_ms,omitempty"`
	// consent-token's reference: the plain client_credentials grant, in
	// turns with the consent tokens.
	GrantRPS   float64 `json:"grant_rps,omitempty"`
	GrantP50ms float64 `json:"grant_p50_ms,omitempty"`
}

// drive sends requests with the run's concurrency for its whole duration,
// in one stretch, and adds what a request cost each process in CPU.
func (b *bench) drive(ctx context.Context, name string, next loadgen.Next) Result {
	var s sample
	b.driveSlice(ctx, &s, b.o.duration, next)
	return s.result(name, b.o.concurrency)
}

// driveSlice sends requests with the run's concurrency for d and adds what
// it measured, and the CPU it cost, to s.
func (b *bench) driveSlice(ctx context.Context, s *sample, d time.Duration, next loadgen.Next) {
	before, mallocs := b.cpuNow(), b.mallocs(ctx)
	s.add(sample{Sample: b.load.Drive(ctx, d, next)})
	s.cpu = s.cpu.add(b.cpuNow().sub(before))
	s.mallocs += b.mallocs(ctx) - mallocs
}

// sample is what one or more stretches of load measured, and what they
// cost flowd and PostgreSQL.
type sample struct {
	loadgen.Sample
	cpu     cpuTimes
	mallocs float64 // flowd's heap allocations
}

func (s *sample) add(o sample) {
	s.Sample.Add(o.Sample)
	s.cpu = s.cpu.add(o.cpu)
	s.mallocs += o.mallocs
}

// result summarizes s: throughput, latency percentiles, CPU per request.
func (s sample) result(name string, concurrency int) Result {
	lat := slices.Clone(s.Latencies)
	slices.Sort(lat)
	r := Result{Scenario: name, Concurrency: concurrency, Seconds: s.Elapsed.Seconds(), Requests: len(lat),
		Errors: s.Errors, FirstError: s.FirstErr}
	if len(lat) == 0 {
		return r
	}
	n := float64(len(lat))
	r.RPS = n / s.Elapsed.Seconds()
	r.P50ms = ms(loadgen.Percentile(lat, 0.50))
	r.P99ms = ms(loadgen.Percentile(lat, 0.99))
	r.MaxMs = ms(lat[len(lat)-1])
	r.FlowdCPUus, r.PostgresCPUus, r.LoadCPUus = perCall(s.cpu.flowd, n), perCall(s.cpu.postgres, n), perCall(s.cpu.load, n)
	r.FlowdAllocs = s.mallocs / n
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
