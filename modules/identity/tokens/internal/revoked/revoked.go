// Package revoked is the token service's set of revoked access tokens that
// have not expired, kept complete from the change feed while it listens.
package revoked

import (
	"sync"
	"time"

	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

// Set holds the jti and expiry of every revoked access token that
// has not expired, so that refusing one, and admitting every other, costs a
// map lookup. Revocations only add to it: each is announced on the change
// feed in its transaction ("jti:<jti> <exp>"). The set is complete while the
// feed listens and the table has been loaded since it began to; otherwise
// (at start, after losing the connection, or past Max) a jti it does
// not hold is looked up in the database.
type Set struct {
	mu       sync.Mutex
	jtis     map[string]time.Time
	complete bool
	epoch    uint64 // bumped when the listener is lost, so that a load racing it does not claim completeness
}

// Max bounds the set; a client that revokes more tokens than this
// within their lifetime sends verification to the database until they expire.
const Max = 100_000

// New returns an empty set, not yet complete.
func New() *Set { return &Set{jtis: map[string]time.Time{}} }

// Has reports whether jti is known revoked, and whether the set is complete,
// so that a jti it does not hold was not revoked.
func (r *Set) Has(jti string) (revoked, complete bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, revoked = r.jtis[jti]
	return revoked, r.complete
}

// Add records a revocation; a full set gives up being complete.
func (r *Set) Add(jti string, expiry, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(jti, expiry, now)
}

func (r *Set) addLocked(jti string, expiry, now time.Time) {
	if len(r.jtis) >= Max {
		r.pruneLocked(now)
	}
	if len(r.jtis) >= Max {
		r.complete = false
		return
	}
	r.jtis[jti] = expiry
}

func (r *Set) pruneLocked(now time.Time) {
	for jti, exp := range r.jtis {
		if !now.Before(exp) {
			delete(r.jtis, jti)
		}
	}
}

// Prune forgets revocations of expired tokens, which verification refuses anyway.
func (r *Set) Prune(now time.Time) {
	r.mu.Lock()
	r.pruneLocked(now)
	r.mu.Unlock()
}

// Lost marks the set incomplete: notifications may be missed from now on.
func (r *Set) Lost() {
	r.mu.Lock()
	r.complete = false
	r.epoch++
	r.mu.Unlock()
}

// NeedsLoad reports whether the set is incomplete, and the epoch a load
// must still see when it finishes.
func (r *Set) NeedsLoad() (bool, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.complete, r.epoch
}

// Loaded merges what a load read after LISTEN began, and makes the set
// complete unless the listener was lost meanwhile or the set is full.
func (r *Set) Loaded(rows []store.RevokedAccessToken, epoch uint64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	full := len(rows) > Max
	if full {
		rows = rows[:Max]
	}
	for _, t := range rows {
		r.addLocked(t.JTI, t.ExpiresAt, now)
	}
	if !full && r.epoch == epoch && len(r.jtis) < Max {
		r.complete = true
	}
}
