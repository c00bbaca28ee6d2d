package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// seededID is the id of seeded flow n.
func seededID(n int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012x", n) }

// TestSharedRoundTripsGiveEachReadItsOwnResults drives many concurrent
// retrieves and list pages through two slots, so that most share a round
// trip, and checks that each retrieve gets its own flow, incidents and extra
// statement's result and each page its organization's flows, that
// another organization's or an unknown flow is not found, and that a
// retrieve that is not found skips its extra statements.
func TestSharedRoundTripsGiveEachReadItsOwnResults(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	const flows = 40
	// Even flows are org-a's, odd ones org-b's; flow n has n % 3 open incidents.
	for _, sql := range []string{`
		insert into flows (id, organization_id, flow_number, reference_id, sandbox, pii_key_id,
			national_id_sealed, national_id_hmac, last_name_sealed, redirect_url, process_instance_id, flow_definition_id,
			flow_definition_version, created_by, expires_at)
		select ('00000000-0000-7000-8000-' || lpad(to_hex(n), 12, '0'))::uuid, case when n % 2 = 0 then 'org-a' else 'org-b' end,
			n, 'REF-' || n, false, 'k', '\x00', '\x00', '\x00', 'https://x.example', gen_random_uuid(), 'consent', 1, 'test',
			now() + interval '1 day'
		from generate_series(1, ` + fmt.Sprint(flows) + `) n`, `
		insert into flow_tasks (organization_id, id, flow_id, task_type, task_category, status)
		select f.organization_id, gen_random_uuid(), f.id, 'webhook', 'webhook', 'failed' from flows f, generate_series(1, 2) i
		where f.flow_number % 3 >= i`, `
		insert into flow_incidents (organization_id, id, flow_id, task_id, task_type, message)
		select organization_id, gen_random_uuid(), flow_id, id, task_type, 'receiver down' from flow_tasks`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu                  sync.Mutex
		roundTrips, carried int
		most                int
	)
	r := NewSharedReads(pool, 2, func(reads int) {
		mu.Lock()
		defer mu.Unlock()
		roundTrips++
		carried += reads
		most = max(most, reads)
	})
	var wg sync.WaitGroup
	errs := make(chan error, 64*25)
	for w := range 64 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 25 {
				n := 1 + rng.IntN(flows+5) // a few beyond the seeded ones
				org := "org-a"
				if rng.IntN(2) == 1 {
					org = "org-b"
				}
				if rng.IntN(4) == 0 { // a list page in the same pipelines
					page, more, err := r.ListFlows(ctx, ListQuery{OrganizationID: org, Limit: 5})
					if err != nil || len(page) != 5 || !more {
						errs <- fmt.Errorf("list of %s: %d flows, more %v, %v", org, len(page), more, err)
						continue
					}
					for i, f := range page {
						if (f.Number%2 == 0) != (org == "org-a") || i > 0 && f.Number > page[i-1].Number {
							errs <- fmt.Errorf("list of %s: flow %d at %d", org, f.Number, i)
						}
					}
					continue
				}
				id := seededID(n)
				var extra string
				f, incidents, err := r.GetFlowAndIncidents(ctx, org, id, func(read database.SharedRead) {
					read.QueueRow(`select $1::text`, []any{id}, func(row database.Row) error { return row.Scan(&extra) })
				})
				mine := n <= flows && (n%2 == 0) == (org == "org-a")
				switch {
				case !mine && !errors.Is(err, database.ErrNotFound):
					errs <- fmt.Errorf("flow %d as %s: %v, want database.ErrNotFound", n, org, err)
				case !mine && extra != "":
					errs <- fmt.Errorf("flow %d as %s: the extra statement was read for a flow not found", n, org)
				case !mine:
				case err != nil:
					errs <- fmt.Errorf("flow %d as %s: %v", n, org, err)
				case f.ID != id || f.ReferenceID != fmt.Sprintf("REF-%d", n) || len(incidents) != n%3 || extra != id:
					errs <- fmt.Errorf("flow %d as %s: got %s %s, %d incidents, extra %q", n, org, f.ID, f.ReferenceID, len(incidents), extra)
				}
				for _, inc := range incidents {
					if inc.FlowID != id {
						errs <- fmt.Errorf("flow %d: an incident of %s", n, inc.FlowID)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every read went in exactly one round trip, and reads did share them.
	if carried != 64*25 || most < 2 || most > maxShared || roundTrips >= carried {
		t.Errorf("%d round trips carried %d reads (at most %d in one), want %d reads sharing round trips of up to %d",
			roundTrips, carried, most, 64*25, maxShared)
	}
}

// TestAGivenUpReadLeavesTheQueue: a caller that gives up while every
// slot is taken withdraws its read, and one that had given up before
// is not queued at all.
func TestAGivenUpReadLeavesTheQueue(t *testing.T) {
	t.Parallel()
	r := NewSharedReads(dbtest.New(t), 1, nil)
	r.slots <- struct{}{} // the only slot, taken
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			r.mu.Lock()
			waiting := len(r.pending)
			r.mu.Unlock()
			if waiting == 1 {
				cancel()
				return
			}
			runtime.Gosched()
		}
	}()
	if _, _, err := r.GetFlowAndIncidents(ctx, "org-a", seededID(1), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a read = %v, want context.Canceled", err)
	}
	if _, _, err := r.GetFlowAndIncidents(ctx, "org-a", seededID(1), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a read with a done context = %v, want context.Canceled", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) != 0 {
		t.Fatalf("%d reads still wait after their callers gave up", len(r.pending))
	}
}

// TestAPanickingReadDoesNotStrandTheOthers: when one read's code panics
// while a round trip's results are handed out, the panic goes on up the
// goroutine that sent it, the other reads of that round trip return an
// error instead of waiting for ever, and the slot and the connection are
// given back.
func TestAPanickingReadDoesNotStrandTheOthers(t *testing.T) {
	t.Parallel()
	r := NewSharedReads(dbtest.New(t), 1, nil)
	r.slots <- struct{}{} // hold the only slot until both reads wait
	type outcome struct {
		err       error
		recovered any
	}
	do := func(read func(pgx.BatchResults) error) <-chan outcome {
		out := make(chan outcome, 1)
		go func() {
			var o outcome
			defer func() {
				o.recovered = recover()
				out <- o
			}()
			o.err = r.Do(context.Background(), func(b *pgx.Batch) { b.Queue(`select 1`) }, read)
		}()
		return out
	}
	panicking := do(func(br pgx.BatchResults) error { panic("a bug in a read") })
	waitPending(r, 1)
	calm := do(func(br pgx.BatchResults) error {
		var one int
		return br.QueryRow().Scan(&one)
	})
	waitPending(r, 2)
	<-r.slots // both go in one round trip, sent by either of them
	p, c := <-panicking, <-calm
	if p.recovered == nil && c.recovered == nil {
		t.Fatal("the panic was swallowed")
	}
	if c.recovered == nil && !errors.Is(c.err, errReadPanicked) {
		t.Errorf("the other read returned %v, want errReadPanicked", c.err)
	}
	if p.recovered == nil && !errors.Is(p.err, errReadPanicked) {
		t.Errorf("the panicking read, not the sender, returned %v, want errReadPanicked", p.err)
	}
	// The slot is free again, and the connection back in the pool (or the
	// pool's cleanup would wait for it for ever).
	if len(r.slots) != 0 {
		t.Error("the round trip's slot stays taken after the panic")
	}
}

// waitPending waits until n reads wait in r for a slot.
func waitPending(r *SharedReads, n int) {
	for {
		r.mu.Lock()
		waiting := len(r.pending)
		r.mu.Unlock()
		if waiting == n {
			return
		}
		runtime.Gosched()
	}
}

// TestAReadTakenIntoARoundTripWaitsForItsResult: a caller whose context
// ends after another caller's round trip took its read does not return
// until its read function has run, so that it never reads a result the
// sender is still writing.
func TestAReadTakenIntoARoundTripWaitsForItsResult(t *testing.T) {
	t.Parallel()
	r := NewSharedReads(dbtest.New(t), 1, nil)
	r.slots <- struct{}{} // the only slot, held until the read waits
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reading := make(chan struct{})
	var result string // written by the sender, read by the caller
	returned := make(chan error, 1)
	go func() {
		err := r.Do(ctx, func(b *pgx.Batch) { b.Queue(`select 'done'`) }, func(br pgx.BatchResults) error {
			close(reading)
			<-ctx.Done()
			// The caller has given up by now; the sender is still busy with
			// its result.
			time.Sleep(50 * time.Millisecond)
			return br.QueryRow().Scan(&result)
		})
		// Read as GetFlowAndIncidents reads its results, error or not.
		if got := result; err != nil || got != "done" {
			returned <- fmt.Errorf("Do returned %v with the result %q, want the read's result", err, got)
			return
		}
		returned <- nil
	}()
	waitPending(r, 1)
	// Another caller's round trip takes the read on the slot held above.
	go r.sendWaiting(context.Background())
	<-reading
	cancel()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
}

// TestReadsArePlannedGenerically: a shared round trip runs its reads with
// their generic plans, and leaves the setting as it was for the
// connection's next user. On Citus, which cannot plan a flow's read with
// its subject key generically, it leaves the plans to PostgreSQL.
func TestReadsArePlannedGenerically(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := database.Open(ctx, dbtest.NewURL(t), 1) // one connection: the next user is the test
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var during, after string
	err = NewSharedReads(pool, 1, nil).Do(ctx, func(b *pgx.Batch) {
		b.Queue(`select current_setting('plan_cache_mode')`)
	}, func(br pgx.BatchResults) error { return br.QueryRow().Scan(&during) })
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `select current_setting('plan_cache_mode')`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	want := "force_generic_plan"
	if dbtest.Citus() {
		want = "auto"
	}
	if during != want || after != "auto" {
		t.Errorf("plans %s in the round trip and %s after it, want %s and auto", during, after, want)
	}
}
