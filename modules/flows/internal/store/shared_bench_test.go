//go:build unix

// The benchmark reads its CPU time with getrusage, which Windows lacks.

package store

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/dbtest"
)

// BenchmarkListFlows reads the first page of ten of an organization's
// flows, one read at a time: the store's own CPU and allocations for a list
// page, the round trip included.
func BenchmarkListFlows(b *testing.B) {
	pool := dbtest.New(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		insert into flows (id, organization_id, flow_number, reference_id, reference_name, sandbox, pii_key_id,
			national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, process_instance_id, flow_definition_id,
			flow_definition_version, created_by, expires_at)
		select ('00000000-0000-7000-8000-' || lpad(to_hex(n), 12, '0'))::uuid, 'org-a', n, 'REF-' || n, 'Loan ' || n,
			false, 'k', decode(repeat('ab', 39), 'hex'), '\x00', '\x00', 'https://x.example', gen_random_uuid(), 'consent', 1, 'test',
			now() + interval '1 day'
		from generate_series(1, 100) n`); err != nil {
		b.Fatal(err)
	}
	r := NewSharedReads(pool, 2, nil)
	b.ReportAllocs()
	before := processCPU()
	for b.Loop() {
		page, _, err := r.ListFlows(ctx, ListQuery{OrganizationID: "org-a", Limit: 10})
		if err != nil || len(page) != 10 {
			b.Fatalf("%d flows, %v", len(page), err)
		}
	}
	// A round trip's time is mostly waiting for PostgreSQL: the process's
	// CPU per read is what the store costs flowd.
	b.ReportMetric(float64(processCPU()-before)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time, user and system, this process has spent.
func processCPU() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
