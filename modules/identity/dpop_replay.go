package identity

import (
	"sync"
	"time"
)

// seenProofs remembers the DPoP proofs (key thumbprint and jti) this
// instance accepted or refused as replays, until they leave the acceptance
// window: a replay sent to the same instance is refused without a database
// round trip. It only ever refuses; dpop_proofs decides what is accepted.
type seenProofs struct {
	mu      sync.Mutex
	entries map[string]time.Time
}

// seenProofsMax bounds the memory; past it, expired entries are dropped and,
// if that is not enough, everything (the database still refuses replays).
const seenProofsMax = 100_000

func (s *seenProofs) init() { s.entries = map[string]time.Time{} }

func (s *seenProofs) has(key string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.entries[key]
	return ok && now.Before(exp)
}

func (s *seenProofs) add(key string, expires, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) >= seenProofsMax {
		s.pruneLocked(now)
		if len(s.entries) >= seenProofsMax {
			clear(s.entries)
		}
	}
	s.entries[key] = expires
}

func (s *seenProofs) prune(now time.Time) {
	s.mu.Lock()
	s.pruneLocked(now)
	s.mu.Unlock()
}

func (s *seenProofs) pruneLocked(now time.Time) {
	for k, exp := range s.entries {
		if !now.Before(exp) {
			delete(s.entries, k)
		}
	}
}
