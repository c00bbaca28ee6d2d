package orgs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/identity"
)

// manualClock stands still until a test moves it.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func newManualClock() *manualClock {
	return &manualClock{t: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)}
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// limitedInstance is one flowd instance's rate limits, on a database other
// instances may share.
func limitedInstance(pool *pgxpool.Pool, clk *manualClock, perMinute int) *Limits {
	return NewLimits(pool, LimitsConfig{Now: clk.now, PerMinute: perMinute})
}

// reconcileIfWoken runs the reconciliation that admitting asked for, as the
// instance's Run would, with no time passing meanwhile.
func reconcileIfWoken(t *testing.T, m *Limits) {
	t.Helper()
	select {
	case <-m.wake:
		if err := m.reconcile(context.Background(), m.pool); err != nil {
			t.Fatal(err)
		}
	default:
	}
}

func sharedCount(t *testing.T, pool *pgxpool.Pool, key string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), "select coalesce(sum(requests), 0) from api_rate_windows where client_key = $1", key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAPIRateLimitCountsDownAndResets: within a window each request leaves
// one fewer; the request past the limit is refused and not counted; the
// window resets when its time is up; a client's own limit, or none, replaces
// the default; an external issuer's client is counted apart from a built-in
// client of the same id.
func TestAPIRateLimitCountsDownAndResets(t *testing.T) {
	t.Parallel()
	clk := newManualClock()
	m := limitedInstance(dbtest.New(t), clk, 5)
	p := identity.Principal{ClientID: "fc_countdown"}

	first := m.AdmitAPIRequest(p)
	if !first.Allowed || first.Limit != 5 || first.Remaining != 4 || first.Reset <= 0 || first.Reset > RateLimitWindow || first.Reset%time.Second != 0 {
		t.Fatalf("first request: %+v", first)
	}
	for want := 3; want >= 0; want-- {
		if st := m.AdmitAPIRequest(p); !st.Allowed || st.Remaining != want || st.Reset != first.Reset {
			t.Fatalf("want %d remaining in the same window: %+v", want, st)
		}
	}
	refused := m.AdmitAPIRequest(p)
	if refused.Allowed || refused.Remaining != 0 || refused.Limit != 5 || refused.Reset != first.Reset {
		t.Fatalf("sixth request: %+v", refused)
	}
	if ext := m.AdmitAPIRequest(identity.Principal{ClientID: p.ClientID, External: true}); !ext.Allowed || ext.Remaining != 4 {
		t.Fatalf("an external client of the same id: %+v", ext)
	}
	own := identity.Principal{ClientID: "fc_own", RateLimit: identity.RateLimit{Own: true, PerMinute: 7}}
	if st := m.AdmitAPIRequest(own); !st.Allowed || st.Limit != 7 || st.Remaining != 6 {
		t.Fatalf("a client's own limit: %+v", st)
	}
	for range 100 {
		if st := m.AdmitAPIRequest(identity.Principal{ClientID: "fc_free", RateLimit: identity.RateLimit{Own: true}}); st != (RateLimitStatus{Allowed: true}) {
			t.Fatalf("a client without a limit: %+v", st)
		}
	}

	clk.advance(first.Reset - time.Second)
	if st := m.AdmitAPIRequest(p); st.Allowed || st.Reset != time.Second {
		t.Fatalf("a second before the reset: %+v", st)
	}
	clk.advance(time.Second)
	if st := m.AdmitAPIRequest(p); !st.Allowed || st.Remaining != 4 || st.Reset != RateLimitWindow {
		t.Fatalf("at the reset: %+v", st)
	}
	lowered := identity.Principal{ClientID: p.ClientID, RateLimit: identity.RateLimit{Own: true, PerMinute: 1}}
	if st := m.AdmitAPIRequest(lowered); st.Allowed || st.Limit != 1 || st.Remaining != 0 {
		t.Fatalf("a limit lowered to what the window has used already: %+v", st)
	}
}

// TestInstancesSharingADatabaseAdmitTheLimitWithinTheTolerance: two
// instances that each see part of a client's requests admit together at
// least the limit and at most the limit plus a tenth of it (the documented
// tolerance for two instances), also when one of them meets the client
// only once the other has used most of the limit; the window then resets
// on both.
func TestInstancesSharingADatabaseAdmitTheLimitWithinTheTolerance(t *testing.T) {
	t.Parallel()
	const limit = 600
	pool := dbtest.New(t)
	clk := newManualClock()
	a, b := limitedInstance(pool, clk, limit), limitedInstance(pool, clk, limit)
	p := identity.Principal{ClientID: "fc_shared"}

	admitted := 0
	request := func(m *Limits) bool {
		st := m.AdmitAPIRequest(p)
		reconcileIfWoken(t, m)
		if st.Allowed {
			admitted++
		}
		return st.Allowed
	}
	// a alone, reconciling each second (every 50 requests here) and when it
	// has used a tenth of the limit since.
	for i := range 500 {
		if !request(a) {
			t.Fatalf("request %d refused on the only instance in use", i+1)
		}
		if i%50 == 49 {
			if err := a.reconcile(context.Background(), pool); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Then both, a taking three requests for each of b's, until neither
	// admits any.
	refusedInARow := 0
	for i := 0; refusedInARow < 20; i++ {
		m := a
		if i%4 == 3 {
			m = b
		}
		if request(m) {
			refusedInARow = 0
		} else {
			refusedInARow++
		}
	}
	if admitted < limit || admitted > limit+limit/apiLimitWake {
		t.Fatalf("the two instances admitted %d requests; want %d to %d", admitted, limit, limit+limit/apiLimitWake)
	}
	for _, m := range []*Limits{a, b} {
		if err := m.reconcile(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
	}
	if n := sharedCount(t, pool, p.ClientID); n != int64(admitted) {
		t.Fatalf("the shared count is %d; the instances admitted %d", n, admitted)
	}

	st := a.AdmitAPIRequest(p)
	clk.advance(st.Reset)
	for _, m := range []*Limits{a, b} {
		if st := m.AdmitAPIRequest(p); !st.Allowed || st.Remaining < limit-2 {
			t.Fatalf("after the reset: %+v", st)
		}
	}
}

// TestConcurrentInstancesCountEveryRequestOnce: two instances running their
// reconcilers while many requests arrive at once never lose or double a
// count, never admit more than the limit each, and do not deadlock.
func TestConcurrentInstancesCountEveryRequestOnce(t *testing.T) {
	t.Parallel()
	const limit = 1000
	pool := dbtest.New(t)
	clk := newManualClock()
	a, b := limitedInstance(pool, clk, limit), limitedInstance(pool, clk, limit)
	ctx, stop := context.WithCancel(context.Background())
	var running sync.WaitGroup
	for _, m := range []*Limits{a, b} {
		running.Go(func() { m.run(ctx, pool) })
	}
	var admitted [2]atomic.Int64
	var clients sync.WaitGroup
	for i := range 8 {
		m := []*Limits{a, b}[i%2]
		clients.Go(func() {
			for refused := 0; refused < 500; {
				// Two clients, so that reconciliations lock several rows.
				p := identity.Principal{ClientID: []string{"fc_one", "fc_two"}[refused%2]}
				if m.AdmitAPIRequest(p).Allowed {
					admitted[i%2].Add(1)
				} else {
					refused++
				}
			}
		})
	}
	clients.Wait()
	stop()
	running.Wait()
	for _, m := range []*Limits{a, b} {
		if err := m.reconcile(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
	}
	total := admitted[0].Load() + admitted[1].Load()
	if n := sharedCount(t, pool, "fc_one") + sharedCount(t, pool, "fc_two"); n != total {
		t.Fatalf("the shared counts add up to %d; the instances admitted %d", n, total)
	}
	for i := range admitted {
		if n := admitted[i].Load(); n > 2*limit {
			t.Fatalf("instance %d admitted %d requests of two clients limited to %d", i, n, limit)
		}
	}
}

// TestAFailedReconciliationKeepsItsCounts: what an instance could not add to
// the shared count is added by its next reconciliation.
func TestAFailedReconciliationKeepsItsCounts(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	m := limitedInstance(pool, newManualClock(), 100)
	p := identity.Principal{ClientID: "fc_retry"}
	for range 3 {
		m.AdmitAPIRequest(p)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.reconcile(cancelled, pool); err == nil {
		t.Fatal("a reconciliation without a database succeeded")
	}
	m.AdmitAPIRequest(p)
	if err := m.reconcile(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if n := sharedCount(t, pool, p.ClientID); n != 4 {
		t.Fatalf("shared count %d, want 4", n)
	}
	if st := m.AdmitAPIRequest(p); st.Remaining != 95 {
		t.Fatalf("after reconciling: %+v", st)
	}
}

// answerLost runs each query to its end and then fails, as a connection
// that drops after the database committed: the caller cannot tell whether
// its write was made.
type answerLost struct{ *pgxpool.Pool }

func (q answerLost) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := q.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("connection lost after the commit")
}

// TestAReconciliationWhoseAnswerWasLostCountsOnce: when the write of an
// instance's counts committed but its answer never came, the next
// reconciliation writes them again, and each request still counts once.
func TestAReconciliationWhoseAnswerWasLostCountsOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	m := limitedInstance(pool, newManualClock(), 100)
	p := identity.Principal{ClientID: "fc_lost"}
	for range 3 {
		m.AdmitAPIRequest(p)
	}
	if err := m.reconcile(context.Background(), answerLost{pool}); err == nil {
		t.Fatal("a reconciliation whose answer was lost succeeded")
	}
	if n := sharedCount(t, pool, p.ClientID); n != 3 {
		t.Fatalf("after the lost answer the shared count is %d, want the 3 it wrote", n)
	}
	m.AdmitAPIRequest(p)
	if err := m.reconcile(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if n := sharedCount(t, pool, p.ClientID); n != 4 {
		t.Fatalf("shared count %d, want 4: each request once", n)
	}
	if st := m.AdmitAPIRequest(p); st.Remaining != 95 {
		t.Fatalf("after reconciling: %+v", st)
	}
}
