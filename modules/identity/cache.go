package identity

import (
	"context"
	"crypto/sha256"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/modules/identity/internal/store"
)

// stateCache keeps what bearer verification reads from the database on every
// request — a client's revocation and sandbox flag, an external client's
// mapping, whether an organization exists — in memory, for as long as this
// instance listens for changes on store.NotifyChannel. Every change to those
// rows sends a notification in its own transaction, so an entry is dropped on
// every instance as the change commits. While the listener is not connected
// (at start, or after losing its connection) the cache is bypassed and every
// request reads the database: correctness never depends on the cache.
type stateCache struct {
	mu        sync.Mutex
	entries   map[string]any
	gen       uint64 // bumped by every invalidation, so a read racing one is not stored
	listening atomic.Bool
}

func (c *stateCache) init() { c.entries = map[string]any{} }

// get returns the cached value of key, or loads it and caches it when safe
// and load says it may be kept.
func (c *stateCache) get(key string, load func() (v any, keep bool, err error)) (any, error) {
	if !c.listening.Load() {
		v, _, err := load()
		return v, err
	}
	c.mu.Lock()
	v, ok := c.entries[key]
	gen := c.gen
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, keep, err := load()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if keep && c.gen == gen && c.listening.Load() && len(c.entries) < 100_000 {
		c.entries[key] = v
	}
	c.mu.Unlock()
	return v, nil
}

func (c *stateCache) invalidate(key string) {
	c.mu.Lock()
	delete(c.entries, key)
	c.gen++
	c.mu.Unlock()
}

func (c *stateCache) invalidateAll() {
	c.mu.Lock()
	clear(c.entries)
	c.gen++
	c.mu.Unlock()
}

// setListening turns the cache on or off; either way it starts empty.
func (c *stateCache) setListening(on bool) {
	c.mu.Lock()
	clear(c.entries)
	c.gen++
	c.listening.Store(on)
	c.mu.Unlock()
}

// tokenCache remembers access tokens whose signature and claims were
// verified, by the SHA-256 of the token, until they expire: a repeated token
// costs a hash and a map lookup instead of an ECDSA verification. Only what
// the token itself proves is cached; revocation is checked on every request.
type tokenCache struct {
	mu      sync.Mutex
	entries map[[32]byte]verifiedToken
}

// verifiedToken is what a verified token proves by itself; what may change
// after it was signed (revocation, mappings) is decided on every request.
type verifiedToken struct {
	expiry   time.Time
	external bool
	keyID    string // built-in tokens: the signing key, re-checked for retirement
	jti      string // built-in tokens: the token's id, re-checked for revocation
	clientID string
	orgID    string // the org_id (or FLOWD_ORG_CLAIM) claim; may be empty for external tokens
	scopes   []string
	audience []string // external tokens
	jkt      string   // cnf.jkt: the token is DPoP-bound to this key (RFC 9449 6.1)
}

const tokenCacheMax = 50_000

func (c *tokenCache) init() { c.entries = map[[32]byte]verifiedToken{} }

func (c *tokenCache) get(raw string, now time.Time) (verifiedToken, [32]byte, bool) {
	sum := sha256.Sum256([]byte(raw))
	c.mu.Lock()
	v, ok := c.entries[sum]
	c.mu.Unlock()
	if ok && !now.Before(v.expiry) {
		return v, sum, false
	}
	return v, sum, ok
}

func (c *tokenCache) put(sum [32]byte, v verifiedToken, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= tokenCacheMax {
		for k, e := range c.entries {
			if !now.Before(e.expiry) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= tokenCacheMax {
			clear(c.entries)
		}
	}
	c.entries[sum] = v
}

// revokedTokens holds the jti and expiry of every revoked access token that
// has not expired, so that refusing one, and admitting every other, costs a
// map lookup. Revocations only add to it: each is announced on
// store.NotifyChannel in its transaction ("jti:<jti> <exp>"). The set is
// complete while the listener is connected and has loaded the table since it
// began to listen; otherwise (at start, after losing the connection, or past
// revokedMax) a jti it does not hold is looked up in the database.
type revokedTokens struct {
	mu       sync.Mutex
	jtis     map[string]time.Time
	complete bool
	epoch    uint64 // bumped when the listener is lost, so that a load racing it does not claim completeness
}

// revokedMax bounds the set; a client that revokes more tokens than this
// within their lifetime sends verification to the database until they expire.
const revokedMax = 100_000

func (r *revokedTokens) init() { r.jtis = map[string]time.Time{} }

// has reports whether jti is known revoked, and whether the set is complete,
// so that a jti it does not hold was not revoked.
func (r *revokedTokens) has(jti string) (revoked, complete bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, revoked = r.jtis[jti]
	return revoked, r.complete
}

// add records a revocation; a full set gives up being complete.
func (r *revokedTokens) add(jti string, expiry, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(jti, expiry, now)
}

func (r *revokedTokens) addLocked(jti string, expiry, now time.Time) {
	if len(r.jtis) >= revokedMax {
		r.pruneLocked(now)
	}
	if len(r.jtis) >= revokedMax {
		r.complete = false
		return
	}
	r.jtis[jti] = expiry
}

func (r *revokedTokens) pruneLocked(now time.Time) {
	for jti, exp := range r.jtis {
		if !now.Before(exp) {
			delete(r.jtis, jti)
		}
	}
}

// prune forgets revocations of expired tokens, which verification refuses anyway.
func (r *revokedTokens) prune(now time.Time) {
	r.mu.Lock()
	r.pruneLocked(now)
	r.mu.Unlock()
}

// lost marks the set incomplete: notifications may be missed from now on.
func (r *revokedTokens) lost() {
	r.mu.Lock()
	r.complete = false
	r.epoch++
	r.mu.Unlock()
}

// needsLoad reports whether the set is incomplete, and the epoch a load
// must still see when it finishes.
func (r *revokedTokens) needsLoad() (bool, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.complete, r.epoch
}

// loaded merges what a load read after LISTEN began, and makes the set
// complete unless the listener was lost meanwhile or the set is full.
func (r *revokedTokens) loaded(rows []store.RevokedAccessToken, epoch uint64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	full := len(rows) > revokedMax
	if full {
		rows = rows[:revokedMax]
	}
	for _, t := range rows {
		r.addLocked(t.JTI, t.ExpiresAt, now)
	}
	if !full && r.epoch == epoch && len(r.jtis) < revokedMax {
		r.complete = true
	}
}

// loadRevoked fills the revoked set from the database while the listener
// is connected: it calls it once LISTEN is in place, so that no revocation
// falls between the two. The epoch is read before listening is checked, so
// that a listener lost after the check leaves the set incomplete.
func (m *Module) loadRevoked(ctx context.Context) error {
	todo, epoch := m.revoked.needsLoad()
	if !todo || !m.states.listening.Load() {
		return nil
	}
	rows, err := store.RevokedAccessTokens(ctx, m.pool, revokedMax+1)
	if err != nil {
		return err
	}
	m.revoked.loaded(rows, epoch, m.now())
	return nil
}

// Run keeps this instance's caches coherent with the database until ctx
// ends: it listens for changes other instances (and the CLI) announce,
// reconciles API request counts with the other instances', and removes
// expired refresh tokens now and then. serve runs it beside the server;
// without it every verification reads the database and API rate limits
// count this instance's requests alone.
func (m *Module) Run(ctx context.Context) error {
	var sweeping sync.WaitGroup
	defer sweeping.Wait()
	sweeping.Go(func() { m.sweep(ctx) })
	sweeping.Go(func() { m.limits.run(ctx, m.pool, m.log) })
	backoff := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		err := m.listen(ctx)
		m.states.setListening(false)
		m.revoked.lost()
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		m.log.Warn("identity: change listener lost; verifying against the database until it is back", "error", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
	return nil
}

// listen holds one connection that LISTENs on store.NotifyChannel and drops
// cache entries as notifications arrive.
func (m *Module) listen(ctx context.Context) error {
	pc, err := m.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "listen "+store.NotifyChannel); err != nil {
		return err
	}
	m.states.setListening(true)
	m.keys.invalidate()
	m.signer.invalidate()
	if err := m.loadRevoked(ctx); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch p := n.Payload; {
		case strings.HasPrefix(p, "client:"):
			id := strings.TrimPrefix(p, "client:")
			m.states.invalidate("client:" + id)
		case strings.HasPrefix(p, "jti:"):
			jti, exp, _ := strings.Cut(strings.TrimPrefix(p, "jti:"), " ")
			unix, err := strconv.ParseInt(exp, 10, 64)
			if err != nil {
				// Not from this version of flowd: look every jti up until reconnected.
				m.revoked.lost()
				continue
			}
			m.revoked.add(jti, time.Unix(unix, 0), m.now())
		case p == "keys":
			m.keys.invalidate()
			m.signer.invalidate()
		default:
			m.states.invalidateAll()
		}
	}
}

// sweep deletes long-expired refresh tokens, the revocations of expired
// access tokens, the used jti of expired client assertions and the jtis of
// expired DPoP proofs every ten minutes, and completes the revoked set again
// when it overflowed.
func (m *Module) sweep(ctx context.Context) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.sweepOnce(ctx)
	}
}

// sweepOnce is one round of sweep.
func (m *Module) sweepOnce(ctx context.Context) {
	for _, del := range []func(context.Context, store.Querier) (int64, error){
		store.DeleteExpiredRefreshTokens, store.DeleteExpiredRevokedAccessTokens, store.DeleteExpiredAssertionJTIs, store.DeleteExpiredDPoPProofs,
	} {
		for {
			n, err := del(ctx, m.pool)
			if err != nil || n == 0 {
				break
			}
		}
	}
	m.revoked.prune(m.now())
	m.dpopSeen.prune(m.now())
	if err := m.loadRevoked(ctx); err != nil {
		m.log.Warn("identity: loading revoked access tokens", "error", err)
	}
}
