package orgs

import (
	"context"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs/internal/store"
)

// RateLimitWindow is the window API rate limits count in: limits are per minute.
const RateLimitWindow = time.Minute

// RateLimitStatus is a client's standing after one API request.
type RateLimitStatus struct {
	// Limit is the client's limit per RateLimitWindow; 0 is no limit: the
	// request is allowed, and the other fields are zero.
	Limit int
	// Remaining is how many more requests the current window admits.
	Remaining int
	// Reset is the time until the window ends, in whole seconds rounded up.
	Reset time.Duration
	// Allowed is false for a request past the limit, which was not counted.
	Allowed bool
}

// apiLimitSync is how often an instance reconciles its API request counts
// with the other instances' when nothing makes it reconcile sooner.
const apiLimitSync = time.Second

// apiLimitWake is the share of its limit a client may use on one instance
// before that instance reconciles at once: together the instances admit at
// most the limit plus this share of it for each instance but one.
const apiLimitWake = 10 // a tenth

// Limits counts each client's API requests in fixed one-minute windows
// (RateLimitWindow), in memory, and reconciles its counts with the other
// instances' through api_rate_windows: one statement writes how many
// requests of each client this instance has admitted in the window so far
// (a count of its own, never an addition, so that a statement that
// committed but whose answer was lost is harmless to send again) and reads
// back every instance's together, for all the clients it has seen in their
// current windows. A request is admitted while the total last read plus
// what this instance admitted since stays under the limit, so admitting
// never waits for the database. An instance reconciles every second, at once when a
// client it has not seen in the window arrives, and at once when a client
// has used a tenth of its limit here since the last reconciliation. Each
// client's windows start at an offset of its own within the minute, so that
// clients that wait for a reset do not all come back at once.
type Limits struct {
	pool         *pgxpool.Pool
	log          *slog.Logger
	now          func() time.Time
	defaultLimit int    // per window; 0 is no limit
	instance     string // this instance's rows in api_rate_windows

	mu      sync.RWMutex
	windows map[string]*clientWindow // by client key

	// wake asks the reconciler to run now rather than at its next tick.
	wake chan struct{}
}

// clientWindow is one client's current window on this instance.
type clientWindow struct {
	offset time.Duration // where the client's windows start within the minute

	mu     sync.Mutex
	start  time.Time
	local  int64 // admitted here in the window
	synced int64 // local as the last reconciliation wrote it
	shared int64 // every instance's count, as the last reconciliation read it (synced among it)
	gone   bool  // dropped from the limiter: look it up again
}

var _ APILimits = (*Limits)(nil)

// LimitsConfig configures Limits.
type LimitsConfig struct {
	// PerMinute is how many API requests a minute a client without a limit
	// of its own may make (FLOWD_API_RATE_LIMIT); 0 is no limit.
	PerMinute int
	Log       *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// NewLimits returns the rate limits of the instance that pool connects.
// Admitting never reads the database; Run reconciles through pool.
func NewLimits(pool *pgxpool.Pool, cfg LimitsConfig) *Limits {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limits{pool: pool, log: cfg.Log, now: cfg.Now, defaultLimit: cfg.PerMinute, instance: uuid.NewString(),
		windows: map[string]*clientWindow{}, wake: make(chan struct{}, 1)}
}

// AdmitAPIRequest implements APILimits.
func (l *Limits) AdmitAPIRequest(p identity.Principal) RateLimitStatus {
	limit := l.defaultLimit
	if p.RateLimit.Own {
		limit = p.RateLimit.PerMinute
	}
	if limit <= 0 {
		return RateLimitStatus{Allowed: true}
	}
	key := rateLimitKey(p)
	now := l.now()
	for {
		w, seen := l.window(key)
		w.mu.Lock()
		if w.gone {
			w.mu.Unlock()
			continue
		}
		st, busy := w.admit(now, limit)
		w.mu.Unlock()
		if !seen || busy {
			l.wakeUp()
		}
		return st
	}
}

// rateLimitKey names a client's windows: its id, apart for an external
// issuer's clients, whose ids the built-in provider does not choose.
func rateLimitKey(p identity.Principal) string {
	if p.External {
		return "ext:" + p.ClientID
	}
	return p.ClientID
}

// window returns the client's window, and whether it was there already.
func (l *Limits) window(key string) (*clientWindow, bool) {
	l.mu.RLock()
	w := l.windows[key]
	l.mu.RUnlock()
	if w != nil {
		return w, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.windows[key]; w != nil {
		return w, true
	}
	w = &clientWindow{offset: windowOffset(key)}
	l.windows[key] = w
	return w, false
}

// admit counts a request at now when the window has room for it under
// limit. It also reports whether the client has used its share of the limit
// here since the last reconciliation.
func (w *clientWindow) admit(now time.Time, limit int) (RateLimitStatus, bool) {
	if start := windowStart(now, w.offset); !start.Equal(w.start) {
		w.start, w.local, w.synced, w.shared = start, 0, 0, 0
	}
	st := RateLimitStatus{Limit: limit, Reset: wholeSeconds(w.start.Add(RateLimitWindow).Sub(now))}
	used := w.shared + w.local - w.synced
	if used >= int64(limit) {
		return st, false
	}
	w.local++
	st.Allowed, st.Remaining = true, limit-int(used)-1
	return st, w.local-w.synced >= max(1, int64(limit/apiLimitWake))
}

func (l *Limits) wakeUp() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// windowOffset is where key's windows start within the minute: the same on
// every instance, and spread over the minute across clients.
func windowOffset(key string) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return time.Duration(h.Sum32()%uint32(RateLimitWindow/time.Millisecond)) * time.Millisecond
}

// windowStart is the start of the window with offset that holds now, to
// the millisecond, which the database keeps exactly.
func windowStart(now time.Time, offset time.Duration) time.Time {
	ms, off, size := now.UnixMilli(), offset.Milliseconds(), RateLimitWindow.Milliseconds()
	return time.UnixMilli(ms - (ms-off)%size)
}

// wholeSeconds rounds d up to whole seconds, as Retry-After and the
// RateLimit field count, so that neither names a moment before the reset.
func wholeSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}

// reconcile adds what this instance admitted since its last reconciliation
// to every instance's counts and reads back their totals, for the clients
// whose windows are current, in one statement; windows that have ended are
// forgotten. When the statement fails, what it was to add is kept for the
// next try.
func (l *Limits) reconcile(ctx context.Context, q database.Querier) error {
	type sending struct {
		counts store.APIRequests
		w      *clientWindow
	}
	now := l.now()
	var batch []sending
	l.mu.Lock()
	for key, w := range l.windows {
		w.mu.Lock()
		if !now.Before(w.start.Add(RateLimitWindow)) {
			w.gone = true
			delete(l.windows, key)
		} else {
			batch = append(batch, sending{store.APIRequests{ClientKey: key, WindowStart: w.start, Requests: w.local}, w})
		}
		w.mu.Unlock()
	}
	l.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	counts := make([]store.APIRequests, len(batch))
	for i, s := range batch {
		counts[i] = s.counts
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := store.WriteAPIRequests(ctx, q, l.instance, counts)
	totals := make(map[string]int64, len(rows))
	for _, r := range rows {
		totals[r.ClientKey] = r.Requests
	}
	for _, s := range batch {
		w := s.w
		w.mu.Lock()
		if err == nil && w.start.Equal(s.counts.WindowStart) {
			w.synced, w.shared = s.counts.Requests, totals[s.counts.ClientKey]
		}
		w.mu.Unlock()
	}
	return err
}

// Run reconciles every apiLimitSync and whenever admitting asks to, and
// deletes other instances' and its own windows once they are long over,
// until ctx ends; then it returns nil. After a failure it waits for the
// next tick, so that an unreachable database is not asked again at every
// request. Without it, limits count this instance's requests alone.
func (l *Limits) Run(ctx context.Context) error {
	l.run(ctx, l.pool)
	return nil
}

func (l *Limits) run(ctx context.Context, q database.Querier) {
	tick := time.NewTicker(apiLimitSync)
	defer tick.Stop()
	var swept time.Time
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-l.wake:
			if failing {
				continue
			}
		}
		err := l.reconcile(ctx, q)
		if err != nil && !failing && ctx.Err() == nil {
			l.log.WarnContext(ctx, "identity: reconciling API rate limits with other instances; counting on this instance alone until it works again", "error", err)
		}
		failing = err != nil
		if now := l.now(); !failing && now.Sub(swept) >= RateLimitWindow {
			swept = now
			for {
				n, err := store.DeleteAPIRateWindows(ctx, q, now.Add(-2*RateLimitWindow))
				if err != nil || n == 0 {
					break
				}
			}
		}
	}
}
