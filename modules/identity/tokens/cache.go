package tokens

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/flowd/flowd/modules/identity/tokens/internal/revoked"
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

// loadRevoked fills the revoked set from the database while the feed
// listens: the feed calls it once LISTEN is in place, so that no revocation
// falls between the two. The epoch is read before listening is checked, so
// that a listener lost after the check leaves the set incomplete.
func (s *Service) loadRevoked(ctx context.Context) error {
	todo, epoch := s.revoked.NeedsLoad()
	if !todo || !s.feed.Listening() {
		return nil
	}
	rows, err := store.RevokedAccessTokens(ctx, s.pool, revoked.Max+1)
	if err != nil {
		return err
	}
	s.revoked.Loaded(rows, epoch, s.now())
	return nil
}
