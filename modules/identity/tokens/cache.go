package tokens

import (
	"context"
	"time"

	"github.com/flowd/flowd/modules/identity/tokens/internal/revoked"
	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

// tokenCacheMax bounds the access tokens whose signature and claims were
// verified that the service remembers, by the SHA-256 of the token, until
// they expire: a repeated token costs a hash and a map lookup instead of an
// ECDSA verification. Only what the token itself proves is cached;
// revocation is checked on every request.
const tokenCacheMax = 50_000

// dpopSeenMax bounds the DPoP proofs remembered (the database still refuses
// replays past it).
const dpopSeenMax = 100_000

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
