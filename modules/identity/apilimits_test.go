package identity

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/dbtest"
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

// limitedInstance is one flowd instance's identity module, as far as rate
// limits go, on a database other instances may share.
func limitedInstance(pool *pgxpool.Pool, clk *manualClock, perMinute int) *Module {
	return New(pool, Config{Issuer: testIssuer, Now: clk.now, APIRateLimit: perMinute})
}

// reconcileIfWoken runs the reconciliation that admitting asked for, as the
// instance's Run would, with no time passing meanwhile.
func reconcileIfWoken(t *testing.T, m *Module) {
	t.Helper()
	select {
	case <-m.limits.wake:
		if err := m.limits.reconcile(context.Background(), m.pool); err != nil {
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
	p := Principal{ClientID: "fc_countdown"}

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
	if ext := m.AdmitAPIRequest(Principal{ClientID: p.ClientID, External: true}); !ext.Allowed || ext.Remaining != 4 {
		t.Fatalf("an external client of the same id: %+v", ext)
	}
	own := Principal{ClientID: "fc_own", RateLimit: RateLimit{Own: true, PerMinute: 7}}
	if st := m.AdmitAPIRequest(own); !st.Allowed || st.Limit != 7 || st.Remaining != 6 {
		t.Fatalf("a client's own limit: %+v", st)
	}
	for range 100 {
		if st := m.AdmitAPIRequest(Principal{ClientID: "fc_free", RateLimit: RateLimit{Own: true}}); st != (RateLimitStatus{Allowed: true}) {
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
	lowered := Principal{ClientID: p.ClientID, RateLimit: RateLimit{Own: true, PerMinute: 1}}
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
	p := Principal{ClientID: "fc_shared"}

	admitted := 0
	request := func(m *Module) bool {
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
			if err := a.limits.reconcile(context.Background(), pool); err != nil {
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
	for _, m := range []*Module{a, b} {
		if err := m.limits.reconcile(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
	}
	if n := sharedCount(t, pool, p.ClientID); n != int64(admitted) {
		t.Fatalf("the shared count is %d; the instances admitted %d", n, admitted)
	}

	st := a.AdmitAPIRequest(p)
	clk.advance(st.Reset)
	for _, m := range []*Module{a, b} {
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
	for _, m := range []*Module{a, b} {
		running.Go(func() { m.limits.run(ctx, pool, m.log) })
	}
	var admitted [2]atomic.Int64
	var clients sync.WaitGroup
	for i := range 8 {
		m := []*Module{a, b}[i%2]
		clients.Go(func() {
			for refused := 0; refused < 500; {
				// Two clients, so that reconciliations lock several rows.
				p := Principal{ClientID: []string{"fc_one", "fc_two"}[refused%2]}
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
	for _, m := range []*Module{a, b} {
		if err := m.limits.reconcile(context.Background(), pool); err != nil {
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
	p := Principal{ClientID: "fc_retry"}
	for range 3 {
		m.AdmitAPIRequest(p)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.limits.reconcile(cancelled, pool); err == nil {
		t.Fatal("a reconciliation without a database succeeded")
	}
	m.AdmitAPIRequest(p)
	if err := m.limits.reconcile(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if n := sharedCount(t, pool, p.ClientID); n != 4 {
		t.Fatalf("shared count %d, want 4", n)
	}
	if st := m.AdmitAPIRequest(p); st.Remaining != 95 {
		t.Fatalf("after reconciling: %+v", st)
	}
}

// TestSetClientRateLimit: a client's own limit reaches its verified tokens
// at once on this instance and, through the change's notification, on
// another; an invalid limit, another organization's client and a revoked
// client are refused; only a change runs the audit hook; the default comes
// back with a zero RateLimit.
func TestSetClientRateLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.APIRateLimit = 600 })
	ctx := context.Background()
	other := New(f.m.pool, f.m.cfg)
	running, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- other.Run(running) }()
	t.Cleanup(func() { stop(); <-done })
	tok := f.token(t).AccessToken
	limitOn := func(m *Module) int {
		t.Helper()
		p, err := m.VerifyAccessToken(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		return m.AdmitAPIRequest(p).Limit
	}
	if got := limitOn(f.m); got != 600 {
		t.Fatalf("limit %d before any change, want the default 600", got)
	}
	// The other instance caches the client's state only while it listens.
	deadline := time.Now().Add(10 * time.Second)
	for !other.states.listening.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := limitOn(other); got != 600 {
		t.Fatalf("limit %d on the other instance, want 600", got)
	}

	var hooked []ClientChange
	hook := func(_ context.Context, _ database.Tx, ch ClientChange) error {
		hooked = append(hooked, ch)
		return nil
	}
	c, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, RateLimit{Own: true, PerMinute: 3}, hook)
	if err != nil || c.RateLimit != (RateLimit{Own: true, PerMinute: 3}) || len(hooked) != 1 || hooked[0].Before.RateLimit.Own {
		t.Fatalf("set: %+v %v, hook saw %+v", c, err, hooked)
	}
	if got := limitOn(f.m); got != 3 {
		t.Fatalf("limit %d on this instance after the change, want 3", got)
	}
	for got := limitOn(other); got != 3; got = limitOn(other) {
		if time.Now().After(deadline) {
			t.Fatalf("the other instance still applies %d", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, RateLimit{Own: true, PerMinute: 3}, hook); err != nil || len(hooked) != 1 {
		t.Fatalf("the same limit again: %v, hook ran %d times", err, len(hooked))
	}
	for _, bad := range []int{-1, MaxRateLimit + 1} {
		if _, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, RateLimit{Own: true, PerMinute: bad}); apperr.CodeOf(err) != apperr.Invalid {
			t.Fatalf("limit %d: %v", bad, err)
		}
	}
	org, err := f.m.CreateOrganization(ctx, NewOrganization{Name: "Other Bank"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.SetClientRateLimit(ctx, org.ID, f.client.ID, RateLimit{}); !errors.Is(err, ErrClientNotFound) {
		t.Fatalf("another organization's client: %v", err)
	}
	if c, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, RateLimit{}, hook); err != nil || c.RateLimit.Own || len(hooked) != 2 {
		t.Fatalf("back to the default: %+v %v", c, err)
	}
	if got := limitOn(f.m); got != 600 {
		t.Fatalf("limit %d after returning to the default", got)
	}
	if _, err := f.m.RevokeClient(ctx, f.org.ID, f.client.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.SetClientRateLimit(ctx, f.org.ID, f.client.ID, RateLimit{Own: true, PerMinute: 9}); !errors.Is(err, ErrClientNotFound) {
		t.Fatalf("a revoked client: %v", err)
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
	p := Principal{ClientID: "fc_lost"}
	for range 3 {
		m.AdmitAPIRequest(p)
	}
	if err := m.limits.reconcile(context.Background(), answerLost{pool}); err == nil {
		t.Fatal("a reconciliation whose answer was lost succeeded")
	}
	if n := sharedCount(t, pool, p.ClientID); n != 3 {
		t.Fatalf("after the lost answer the shared count is %d, want the 3 it wrote", n)
	}
	m.AdmitAPIRequest(p)
	if err := m.limits.reconcile(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if n := sharedCount(t, pool, p.ClientID); n != 4 {
		t.Fatalf("shared count %d, want 4: each request once", n)
	}
	if st := m.AdmitAPIRequest(p); st.Remaining != 95 {
		t.Fatalf("after reconciling: %+v", st)
	}
}
