package flows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/flows"
)

// fastExpiry makes the expiry workers look for due jobs every 10 ms.
func fastExpiry(c *flows.Config) { c.ExpiryPollInterval = 10 * time.Millisecond }

// decide records the flow's decision, with validUntil as the evidence's.
func (b *bundle) decide(t *testing.T, flowID string, accept bool, validUntil time.Time) {
	t.Helper()
	err := b.inTx(func(tx pgx.Tx) error {
		_, err := b.decideTx(context.Background(), tx, b.caller.OrganizationID, flowID, accept, flows.Evidence{ValidUntil: &validUntil})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// makeDue ends the validity of the flows' acceptances and makes their
// expiry jobs available at once, as River's scheduler would at valid_until.
func (b *bundle) makeDue(t *testing.T, flowIDs ...string) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), `update flows set valid_until = now() - interval '1 second'
		where id = any($1::uuid[])`, flowIDs); err != nil {
		t.Fatal(err)
	}
	b.makeJobsAvailable(t, flowIDs...)
}

// makeJobsAvailable makes the flows' expiry jobs available at once, whether
// or not the acceptances are due.
func (b *bundle) makeJobsAvailable(t *testing.T, flowIDs ...string) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), `update flows_river.river_job set state = 'available', scheduled_at = now(), finalized_at = null
		where kind = 'flowd.consent_expiry' and args->>'flow_id' = any($1)`, flowIDs); err != nil {
		t.Fatal(err)
	}
}

// expiryJobs returns the states of a flow's expiry jobs, and of those worked, with an "attempted " prefix.
func (b *bundle) expiryJobs(t *testing.T, flowID string) string {
	t.Helper()
	var s string
	if err := b.pool.QueryRow(context.Background(), `select coalesce(string_agg(
		case when attempted_at is null then '' else 'attempted ' end || state::text, ',' order by id), '')
		from flows_river.river_job where kind = 'flowd.consent_expiry' and args->>'flow_id' = $1`, flowID).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// runExpiry runs the bundle's expiry workers until the test ends, and then
// checks that they stopped cleanly.
func (b *bundle) runExpiry(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.flows.RunExpiry(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("RunExpiry = %v, want nil once its context ended", err)
			}
		case <-time.After(time.Until(testwait.Deadline(t))):
			t.Error("RunExpiry did not return after its context ended")
		}
	})
}

// waitFor polls cond until it holds, failing the test when its deadline is near.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExpiryJobExpiresADueAcceptanceOnce: the job scheduled with an
// acceptance expires it once it is due, with one flow.expired; it leaves a
// withdrawn or deleted flow alone, waits for one not yet due, and running
// again changes nothing. A rejection schedules nothing.
func TestExpiryJobExpiresADueAcceptanceOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, fastExpiry)
	ctx := context.Background()
	b.runExpiry(t)
	// The sweep the workers run at start is done before anything is due, so
	// that the jobs below are what expires.
	waitFor(t, "the first sweep completed", func() bool {
		return b.count(t, `select count(*) from flows_river.river_job where kind = 'flowd.consent_expiry_sweep' and state = 'completed'`) == 1
	})

	later := time.Now().Add(time.Hour)
	tests := []struct {
		name       string
		accept     bool
		before     func(t *testing.T, flowID string) // between the decision and the job's run
		wantJobs   string
		wantStatus flows.ConsentStatus // empty: deleted
		wantEvents string
	}{
		{"due", true, func(t *testing.T, id string) { b.makeDue(t, id) }, "attempted completed", flows.Expired,
			"flow.created:1,flow.accepted:2,flow.expired:3"},
		{"withdrawn, then due", true, func(t *testing.T, id string) {
			if _, err := b.withdraw(ctx, id); err != nil {
				t.Fatal(err)
			}
			b.makeDue(t, id)
		}, "attempted completed", flows.Withdrawn, "flow.created:1,flow.accepted:2,flow.withdrawn:3"},
		{"deleted, then due", true, func(t *testing.T, id string) {
			if _, err := b.flows.Delete(ctx, b.caller, id, etag.Any); err != nil {
				t.Fatal(err)
			}
			b.makeJobsAvailable(t, id)
		}, "attempted completed", "", "flow.created:1,flow.accepted:2,cancel-pending:0,flow.deleted:3"},
		{"not yet due", true, func(t *testing.T, id string) { b.makeJobsAvailable(t, id) }, "attempted scheduled", flows.Accepted,
			"flow.created:1,flow.accepted:2"},
		{"rejected", false, func(*testing.T, string) {}, "", flows.Rejected, "flow.created:1,flow.rejected:2"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := b.create(t, newFlow(fmt.Sprintf("ID-%d", i))).FlowID
			b.decide(t, id, tt.accept, later)
			tt.before(t, id)
			waitFor(t, "the job was worked", func() bool { return b.expiryJobs(t, id) == tt.wantJobs })
			if got := b.eventsOf(t, id); got != tt.wantEvents {
				t.Fatalf("events %s, want %s", got, tt.wantEvents)
			}
			f, err := b.flows.Get(ctx, b.caller, id)
			if tt.wantStatus == "" {
				if !errors.Is(err, flows.ErrNotFound) {
					t.Fatalf("deleted flow: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.ConsentStatus != tt.wantStatus || (f.ExpiredAt != nil) != (tt.wantStatus == flows.Expired) {
				t.Fatalf("status %s, expiredAt %v; want %s", f.ConsentStatus, f.ExpiredAt, tt.wantStatus)
			}
		})
	}

	// Expired is final: running the job again, or a sweep, changes nothing,
	// and an expired acceptance cannot be withdrawn.
	id := b.create(t, newFlow("ID-again")).FlowID
	b.decide(t, id, true, later)
	b.makeDue(t, id)
	waitFor(t, "the job was worked", func() bool { return b.expiryJobs(t, id) == "attempted completed" })
	expired := b.get(t, id)
	if expired.ConsentStatus != flows.Expired || expired.ProcessStatus != flows.Completed || expired.Version != 3 ||
		expired.ExpiredAt == nil || expired.Evidence.ValidUntil == nil || !expired.Evidence.ValidUntil.Before(*expired.ExpiredAt) {
		t.Fatalf("expired: %+v", expired)
	}
	b.makeJobsAvailable(t, id)
	waitFor(t, "the job was worked again", func() bool { return b.expiryJobs(t, id) == "attempted completed" })
	if n, err := b.flows.ExpireDueAcceptances(ctx, 100); n != 0 || err != nil {
		t.Fatalf("a sweep after the job: %d, %v", n, err)
	}
	if _, err := b.withdraw(ctx, id); !errors.Is(err, flows.ErrNotAccepted) {
		t.Fatalf("withdrawing an expired acceptance: %v", err)
	}
	if got := b.eventsOf(t, id); got != "flow.created:1,flow.accepted:2,flow.expired:3" {
		t.Fatalf("events %s", got)
	}
	if n := b.count(t, `select count(*) from test_events where kind = 'flow.expired' and status = 'Expired' and flow_status = 'completed'`); n != 2 {
		t.Fatalf("%d flow.expired events with status Expired and flow status completed, want 2", n)
	}
	if got := b.get(t, id); got.Version != 3 || !got.UpdatedAt.Equal(expired.UpdatedAt) {
		t.Fatalf("the second run changed the flow: version %d", got.Version)
	}
	page, err := b.flows.List(ctx, b.caller, flows.ListParams{Archived: true, Status: flows.Expired})
	if err != nil || len(page.Flows) != 2 {
		t.Fatalf("list of expired flows: %d, %v", len(page.Flows), err)
	}
	if logs := b.logs.String(); logs != "" {
		t.Fatalf("the expiry workers logged:\n%s", logs)
	}
}

// TestTwoInstancesExpireEachDueAcceptanceOnce: two instances, each with its
// own pool, work the expiry jobs of one database while their leader sweeps
// at start; each due acceptance, with a job or without one (accepted before
// expiry existed), expires exactly once with exactly one flow.expired.
func TestTwoInstancesExpireEachDueAcceptanceOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	first := setupOn(t, url, fastExpiry)
	pools := []*bundle{first, instance(open(t, url), first.sealer, fastExpiry)}

	const n = 40
	ids := make([]string, n)
	for i := range ids {
		b := pools[i%2]
		ids[i] = b.create(t, newFlow(fmt.Sprintf("ID-%d", i))).FlowID
		b.decide(t, ids[i], true, time.Now().Add(time.Hour))
	}
	// Every fourth acceptance has no job, as one accepted before expiry
	// existed: only a sweep finds it.
	var withoutJob []string
	for i := 0; i < n; i += 4 {
		withoutJob = append(withoutJob, ids[i])
	}
	if _, err := first.pool.Exec(ctx, `delete from flows_river.river_job where args->>'flow_id' = any($1)`, withoutJob); err != nil {
		t.Fatal(err)
	}
	first.makeDue(t, ids...)

	var start sync.WaitGroup
	for _, b := range pools {
		start.Go(func() { b.runExpiry(t) })
	}
	start.Wait()
	waitFor(t, "every acceptance expired", func() bool {
		page, err := pools[1].flows.List(ctx, first.caller, flows.ListParams{Archived: true, Status: flows.Expired, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Flows) == n
	})
	waitFor(t, "every expiry job finished", func() bool {
		return first.count(t, `select count(*) from flows_river.river_job where state <> 'completed'`) == 0
	})
	for _, id := range ids {
		if got := first.eventsOf(t, id); got != "flow.created:1,flow.accepted:2,flow.expired:3" {
			t.Errorf("flow %s: events %s", id, got)
		}
		if f := pools[1].get(t, id); f.ConsentStatus != flows.Expired || f.Version != 3 {
			t.Errorf("flow %s: %s, version %d", id, f.ConsentStatus, f.Version)
		}
	}
	for i, b := range pools {
		if logs := withoutRetriedElections(b.logs.String()); logs != "" {
			t.Errorf("instance %d logged:\n%s", i, logs)
		}
		if logs := b.logs.String(); strings.Contains(logs, "ID-") {
			t.Errorf("instance %d logged a national id", i)
		}
	}
}

// withoutRetriedElections drops River's reports of a leader election that
// timed out, which it retries: a busy machine makes them, and they say
// nothing of expiry.
func withoutRetriedElections(logs string) string {
	var kept []string
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, "leadership.Elector: Error attempting to elect") {
			kept = append(kept, line)
		}
	}
	return strings.TrimSpace(strings.Join(kept, "\n"))
}
