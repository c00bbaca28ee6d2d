package tokens

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

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
// map lookup. Revocations only add to it: each is announced on the change
// feed in its transaction ("jti:<jti> <exp>"). The set is complete while the
// feed listens and the table has been loaded since it began to; otherwise
// (at start, after losing the connection, or past revokedMax) a jti it does
// not hold is looked up in the database.
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

// loadRevoked fills the revoked set from the database while the feed
// listens: the feed calls it once LISTEN is in place, so that no revocation
// falls between the two. The epoch is read before listening is checked, so
// that a listener lost after the check leaves the set incomplete.
func (s *Service) loadRevoked(ctx context.Context) error {
	todo, epoch := s.revoked.needsLoad()
	if !todo || !s.feed.Listening() {
		return nil
	}
	rows, err := store.RevokedAccessTokens(ctx, s.pool, revokedMax+1)
	if err != nil {
		return err
	}
	s.revoked.loaded(rows, epoch, s.now())
	return nil
}
