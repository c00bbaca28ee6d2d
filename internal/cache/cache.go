// Package cache is flowd's one bounded in-memory cache: a map behind a
// mutex that holds at most a fixed number of values. What the caches of
// flowd need beyond that (values that expire, loads that must not keep a
// value forgotten while they ran) are options and methods of the one type.
package cache

import (
	"sync"
	"time"
)

// Map holds at most a size of values. It keeps them in two generations of half
// that each: when the current one is full (after expired values are
// dropped) it becomes the previous one and the older values go, so that
// the values put or read most lately are the ones kept, and a full cache
// costs no scan. A value read from the previous generation moves to the
// current one.
type Map[K comparable, V any] struct {
	mu       sync.Mutex
	half     int
	current  map[K]entry[V]
	previous map[K]entry[V]
	now      func() time.Time // nil: values do not expire
	gen      uint64           // counts forgettings (Delete, DeleteFunc, Clear)
}

type entry[V any] struct {
	value   V
	expires time.Time // zero: never
}

// Option is a special case of a cache.
type Option func(*options)

type options struct{ now func() time.Time }

// Expiring makes values put with PutUntil miss from their expiry on, by
// the clock now, and be the first to go when the cache is full.
func Expiring(now func() time.Time) Option { return func(o *options) { o.now = now } }

// New returns an empty cache of at most size values (two at least).
func New[K comparable, V any](size int, opts ...Option) *Map[K, V] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	half := max(size/2, 1)
	return &Map[K, V]{half: half, current: make(map[K]entry[V]), previous: map[K]entry[V]{}, now: o.now}
}

// Get returns the value of key, if it is held and has not expired.
func (m *Map[K, V]) Get(key K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.current[key]
	if !ok {
		if e, ok = m.previous[key]; ok {
			delete(m.previous, key)
			m.putLocked(key, e)
		}
	}
	if !ok || m.expiredLocked(e) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// Put keeps v as the value of key.
func (m *Map[K, V]) Put(key K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(key, entry[V]{value: v})
}

// PutUntil keeps v as the value of key until expires, in a cache made
// Expiring.
func (m *Map[K, V]) PutUntil(key K, v V, expires time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(key, entry[V]{value: v, expires: expires})
}

// Gen counts the forgettings so far. A caller that loads a value without
// holding the cache reads Gen first and keeps the value with PutIf, so that
// a value older than a forgetting that raced the load is not kept.
func (m *Map[K, V]) Gen() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

// PutIf keeps v as the value of key unless something was forgotten since
// Gen returned gen, and reports whether it did.
func (m *Map[K, V]) PutIf(gen uint64, key K, v V) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen {
		return false
	}
	m.putLocked(key, entry[V]{value: v})
	return true
}

// Delete forgets the value of key.
func (m *Map[K, V]) Delete(key K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.current, key)
	delete(m.previous, key)
	m.gen++
}

// DeleteFunc forgets every value for which del returns true.
func (m *Map[K, V]) DeleteFunc(del func(K, V) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range []map[K]entry[V]{m.current, m.previous} {
		for k, e := range g {
			if del(k, e.value) {
				delete(g, k)
			}
		}
	}
	m.gen++
}

// Clear forgets every value.
func (m *Map[K, V]) Clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.current)
	clear(m.previous)
	m.gen++
}

// Prune drops the values that have expired.
func (m *Map[K, V]) Prune() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
}

// Len is the number of values held, expired ones included until they are
// dropped.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.current) + len(m.previous)
}

func (m *Map[K, V]) putLocked(key K, e entry[V]) {
	if _, ok := m.current[key]; !ok && len(m.current) >= m.half {
		m.pruneLocked()
		if len(m.current) >= m.half {
			m.previous, m.current = m.current, make(map[K]entry[V], m.half)
		}
	}
	m.current[key] = e
	delete(m.previous, key)
}

func (m *Map[K, V]) expiredLocked(e entry[V]) bool {
	return m.now != nil && !e.expires.IsZero() && !m.now().Before(e.expires)
}

func (m *Map[K, V]) pruneLocked() {
	if m.now == nil {
		return
	}
	now := m.now()
	for _, g := range []map[K]entry[V]{m.current, m.previous} {
		for k, e := range g {
			if !e.expires.IsZero() && !now.Before(e.expires) {
				delete(g, k)
			}
		}
	}
}
