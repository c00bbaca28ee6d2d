//go:build unix

// The benchmark reads its CPU time with getrusage, which Windows lacks.

package store

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// seedBenchFlows inserts 100 flows of org-a, numbered 1 to 100, with the
// ids seededID gives.
func seedBenchFlows(b *testing.B) *pgxpool.Pool {
	pool := dbtest.New(b)
	if _, err := pool.Exec(context.Background(), `
		insert into flows (id, organization_id, flow_number, reference_id, reference_name, sandbox, pii_key_id,
			national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, process_instance_id, flow_definition_id,
			flow_definition_version, created_by, expires_at)
		select ('00000000-0000-7000-8000-' || lpad(to_hex(n), 12, '0'))::uuid, 'org-a', n, 'REF-' || n, 'Loan ' || n,
			false, 'k', decode(repeat('ab', 39), 'hex'), '\x00', '\x00', 'https://x.example', gen_random_uuid(), 'consent', 1, 'test',
			now() + interval '1 day'
		from generate_series(1, 100) n`); err != nil {
		b.Fatal(err)
	}
	return pool
}

// BenchmarkListFlows reads the first page of ten of an organization's
// flows, one read at a time: the store's own CPU and allocations for a list
// page, the round trip included.
func BenchmarkListFlows(b *testing.B) {
	r := NewSharedReads(seedBenchFlows(b), 2, nil)
	ctx := context.Background()
	measureCPU(b, func() {
		page, _, err := r.ListFlows(ctx, ListQuery{OrganizationID: "org-a", Limit: 10})
		if err != nil || len(page) != 10 {
			b.Fatalf("%d flows, %v", len(page), err)
		}
	})
}

// BenchmarkListFlowsDeep reads the page of ten after the 50th flow, whose
// position the reads remember after the first.
func BenchmarkListFlowsDeep(b *testing.B) {
	r := NewSharedReads(seedBenchFlows(b), 2, nil)
	ctx := context.Background()
	measureCPU(b, func() {
		page, _, err := r.ListFlows(ctx, ListQuery{OrganizationID: "org-a", Limit: 10, CursorID: seededID(50)})
		if err != nil || len(page) != 10 {
			b.Fatalf("%d flows, %v", len(page), err)
		}
	})
}

// BenchmarkGetFlowAndIncidents reads a flow and its open incidents, as a
// retrieve does.
func BenchmarkGetFlowAndIncidents(b *testing.B) {
	r := NewSharedReads(seedBenchFlows(b), 2, nil)
	ctx := context.Background()
	measureCPU(b, func() {
		if _, _, err := r.GetFlowAndIncidents(ctx, "org-a", seededID(42), nil); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkInsertNumberedFlow inserts a flow with its consent task and its
// person's new subject key, as a create of a new person does.
func BenchmarkInsertNumberedFlow(b *testing.B) {
	pool := dbtest.New(b)
	ctx := context.Background()
	name, tag := "Loan", "v1"
	n := 0
	measureCPU(b, func() {
		n++
		f := Flow{ID: fmt.Sprintf("00000000-0000-7000-9000-%012x", n), OrganizationID: "org-a", ReferenceName: &name,
			ConsentStatus: "Unopened", ProcessStatus: "active",
			PIIKeyID: "k", NationalIDSealed: make([]byte, 39), NationalIDHMAC: make([]byte, 32), LastNameSealed: make([]byte, 30),
			RedirectURL: "https://x.example/done", ProcessInstanceID: "00000000-0000-4000-8000-000000000001",
			FlowDefinitionID: "consent", FlowDefinitionVersion: 1, VersionTag: &tag, CreatedBy: "client"}
		task := &Task{OrganizationID: "org-a", ID: fmt.Sprintf("00000000-0000-7000-a000-%012x", n), FlowID: f.ID,
			TaskType: "consent", TaskCategory: "user-task", Status: "pending"}
		key := SubjectKey{OrganizationID: "org-a", ID: fmt.Sprintf("00000000-0000-7000-b000-%012x", n),
			Subject: []byte(fmt.Sprintf("subject %d", n)), KeyID: "k", KeySealed: make([]byte, 60), NationalIDSealed: make([]byte, 39)}
		f.SubjectKeyID = &key.ID
		if err := InsertNumberedFlow(ctx, pool, &f, key, [][]byte{key.Subject}, "FLOW", time.Hour, task); err != nil {
			b.Fatal(err)
		}
	})
}

// measureCPU runs op b.N times and reports, besides allocations, the
// process's CPU per op: a round trip's time is mostly waiting for
// PostgreSQL, so the process's CPU is what the store costs flowd.
func measureCPU(b *testing.B, op func()) {
	b.ReportAllocs()
	before := processCPU()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(processCPU()-before)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time, user and system, this process has spent.
func processCPU() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
