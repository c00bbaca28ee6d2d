package changes

import "sync"

// Cache is a part's copy of values that hot paths read, by key, kept for as
// long as its Feed listens: every change to what a value was loaded from is
// announced, and the part's subscriber forgets the value.
type Cache[K comparable, V any] struct {
	feed *Feed
	max  int

	mu      sync.Mutex
	entries map[K]V
	gen     uint64 // bumped by every forgetting, so that a load racing one is not kept
}

// NewCache returns an empty cache of at most max values, kept while feed listens.
func NewCache[K comparable, V any](feed *Feed, max int) *Cache[K, V] {
	c := &Cache[K, V]{feed: feed, max: max, entries: map[K]V{}}
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
	c.mu.Lock()
	v, ok := c.entries[key]
	gen := c.gen
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, keep, err := load()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if keep && c.gen == gen && c.feed.listening.Load() && len(c.entries) < c.max {
		c.entries[key] = v
	}
	c.mu.Unlock()
	return v, nil
}

// Has reports whether a value of key is kept.
func (c *Cache[K, V]) Has(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[key]
	return ok
}

// Forget drops the value of key.
func (c *Cache[K, V]) Forget(key K) {
	c.mu.Lock()
	delete(c.entries, key)
	c.gen++
	c.mu.Unlock()
}

// ForgetAll drops every value.
func (c *Cache[K, V]) ForgetAll() {
	c.mu.Lock()
	clear(c.entries)
	c.gen++
	c.mu.Unlock()
}
