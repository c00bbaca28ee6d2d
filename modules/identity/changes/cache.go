package changes

import "github.com/flowd/flowd/internal/cache"

// Cache is a part's copy of values that hot paths read, by key, kept for as
// long as its Feed listens: every change to what a value was loaded from is
// announced, and the part's subscriber forgets the value.
type Cache[K comparable, V any] struct {
	feed    *Feed
	entries *cache.Map[K, V]
}

// NewCache returns an empty cache of at most size values, kept while feed listens.
func NewCache[K comparable, V any](feed *Feed, size int) *Cache[K, V] {
	c := &Cache[K, V]{feed: feed, entries: cache.New[K, V](size)}
	feed.mu.Lock()
	feed.caches = append(feed.caches, c)
	feed.mu.Unlock()
	return c
}

// Get returns the value of key, or loads it and keeps it when load says it
// may be kept and nothing was forgotten meanwhile. While the feed is not
// listening it only loads.
func (c *Cache[K, V]) Get(key K, load func() (v V, keep bool, err error)) (V, error) {
	if !c.feed.listening.Load() {
		v, _, err := load()
		return v, err
	}
	gen := c.entries.Gen()
	if v, ok := c.entries.Get(key); ok {
		return v, nil
	}
	v, keep, err := load()
	if err != nil {
		return v, err
	}
	// A forgetting since gen was read, the feed's as it stops listening
	// among them, leaves the value unkept.
	if keep && c.feed.listening.Load() {
		c.entries.PutIf(gen, key, v)
	}
	return v, nil
}

// Has reports whether a value of key is kept.
func (c *Cache[K, V]) Has(key K) bool {
	_, ok := c.entries.Get(key)
	return ok
}

// Forget drops the value of key.
func (c *Cache[K, V]) Forget(key K) { c.entries.Delete(key) }

// ForgetAll drops every value.
func (c *Cache[K, V]) ForgetAll() { c.entries.Clear() }
