package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
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
	clientID string
	orgID    string // the org_id (or FLOWD_ORG_CLAIM) claim; may be empty for external tokens
	scopes   []string
	audience []string // external tokens
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

// verifiedSecrets remembers, for a few minutes, the SHA-256 of client secrets
// that passed argon2id, keyed by client and stored hash, so that a client
// asking for tokens often does not pay the slow hash each time. A rotated or
// revoked secret has another stored hash (or none) and misses. Secrets are
// 256 random bits, so their SHA-256 in memory gives nothing away.
type verifiedSecrets struct {
	mu      sync.Mutex
	entries map[string]secretEntry
}

type secretEntry struct {
	storedHash string
	sum        [32]byte
	until      time.Time
}

func (v *verifiedSecrets) init() { v.entries = map[string]secretEntry{} }

func (v *verifiedSecrets) ok(clientID, storedHash, secret string, now time.Time) bool {
	v.mu.Lock()
	e, found := v.entries[clientID]
	v.mu.Unlock()
	sum := sha256.Sum256([]byte(secret))
	return found && e.storedHash == storedHash && now.Before(e.until) && subtle.ConstantTimeCompare(e.sum[:], sum[:]) == 1
}

func (v *verifiedSecrets) remember(clientID, storedHash, secret string, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.entries) >= 10_000 {
		clear(v.entries)
	}
	v.entries[clientID] = secretEntry{storedHash: storedHash, sum: sha256.Sum256([]byte(secret)), until: now.Add(5 * time.Minute)}
}

func (v *verifiedSecrets) forget(clientID string) {
	v.mu.Lock()
	delete(v.entries, clientID)
	v.mu.Unlock()
}

// Run keeps this instance's caches coherent with the database until ctx
// ends: it listens for changes other instances (and the CLI) announce, and
// removes expired refresh tokens now and then. serve runs it beside the
// server; without it every verification reads the database.
func (m *Module) Run(ctx context.Context) error {
	var sweeping sync.WaitGroup
	defer sweeping.Wait()
	sweeping.Go(func() { m.sweep(ctx) })
	backoff := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		err := m.listen(ctx)
		m.states.setListening(false)
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
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch p := n.Payload; {
		case strings.HasPrefix(p, "client:"):
			id := strings.TrimPrefix(p, "client:")
			m.states.invalidate("client:" + id)
			m.secrets.forget(id)
		case p == "keys":
			m.keys.invalidate()
			m.signer.invalidate()
		default:
			m.states.invalidateAll()
		}
	}
}

// sweep deletes long-expired refresh tokens every ten minutes.
func (m *Module) sweep(ctx context.Context) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			n, err := store.DeleteExpiredRefreshTokens(ctx, m.pool)
			if err != nil || n == 0 {
				break
			}
		}
	}
}
