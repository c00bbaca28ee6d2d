// Package windowlimit counts, per key, what happened within a sliding
// window, and refuses more than a limit of it: the costly client
// authentications of the token service, the person's own page's writes.
package windowlimit

import (
	"sync"
	"time"
)

// Limiter allows, per key, limit slots within a sliding window: Take takes
// one, or says how long until the oldest leaves the window; GiveBack
// returns the latest, for an attempt that should not count after all. The
// counts are per instance and in memory; keys whose slots have all left the
// window are swept.
type Limiter struct {
	mu     sync.Mutex
	now    func() time.Time
	window time.Duration
	limit  int
	taken  map[string][]time.Time
	swept  time.Time
}

// New returns a limiter of limit slots per key within window.
func New(now func() time.Time, window time.Duration, limit int) *Limiter {
	return &Limiter{now: now, window: window, limit: limit, taken: map[string][]time.Time{}}
}

// Take takes a slot for key, or reports how long until one frees up.
func (l *Limiter) Take(key string) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	ts := l.recent(key, now)
	if len(ts) >= l.limit {
		wait = ts[len(ts)-l.limit].Add(l.window).Sub(now)
		return max(wait, time.Second), false
	}
	l.taken[key] = append(ts, now)
	if now.Sub(l.swept) > l.window {
		l.swept = now
		for k := range l.taken {
			l.recent(k, now)
		}
	}
	return 0, true
}

// GiveBack returns the latest slot of key, after the attempt that took it
// succeeded or never did the costly work.
func (l *Limiter) GiveBack(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ts := l.taken[key]; len(ts) > 0 {
		l.taken[key] = ts[:len(ts)-1]
	}
}

// recent drops key's slots older than the window and returns the rest.
func (l *Limiter) recent(key string, now time.Time) []time.Time {
	ts := l.taken[key]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= l.window {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(l.taken, key)
		return nil
	}
	l.taken[key] = ts
	return ts
}
