package identity

import (
	"sync"
	"time"
)

// failureLimiter counts failed client authentications per key (a client id or
// an address) in a sliding window. A key with too many failures is refused
// before any secret is hashed, which stops online guessing and keeps a flood
// of bad secrets from burning CPU on argon2id. The counts are per instance:
// they guard this instance's CPU, and a guesser spread over instances still
// meets a 256-bit secret.
type failureLimiter struct {
	mu       sync.Mutex
	now      func() time.Time
	window   time.Duration
	failures map[string][]time.Time
	swept    time.Time
}

func newFailureLimiter(now func() time.Time, window time.Duration) *failureLimiter {
	return &failureLimiter{now: now, window: window, failures: map[string][]time.Time{}}
}

// blocked reports whether key has limit or more failures in the window, and
// if so how long until the oldest of them leaves it.
func (l *failureLimiter) blocked(key string, limit int) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	fs := l.recent(key, now)
	if len(fs) < limit {
		return 0, false
	}
	wait := fs[len(fs)-limit].Add(l.window).Sub(now)
	return max(wait, time.Second), true
}

// fail records a failure of key.
func (l *failureLimiter) fail(key string, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	fs := append(l.recent(key, now), now)
	if len(fs) > limit {
		fs = fs[len(fs)-limit:]
	}
	l.failures[key] = fs
	if now.Sub(l.swept) > l.window {
		l.swept = now
		for k := range l.failures {
			l.recent(k, now)
		}
	}
}

// reset forgets key's failures, after it authenticated.
func (l *failureLimiter) reset(key string) {
	l.mu.Lock()
	delete(l.failures, key)
	l.mu.Unlock()
}

// recent drops key's failures older than the window and returns the rest.
func (l *failureLimiter) recent(key string, now time.Time) []time.Time {
	fs := l.failures[key]
	i := 0
	for i < len(fs) && now.Sub(fs[i]) >= l.window {
		i++
	}
	fs = fs[i:]
	if len(fs) == 0 {
		delete(l.failures, key)
		return nil
	}
	l.failures[key] = fs
	return fs
}
