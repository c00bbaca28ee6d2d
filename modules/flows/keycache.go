package flows

import (
	"sync"

	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// maxCachedKeys bounds the opened subject keys kept in memory: each holds
// its expanded AES and GHASH tables, a few KiB.
const maxCachedKeys = 4096

// keyCache keeps opened subject keys, by id for reads and by person for
// creates, so that neither opens a key it opened before. It never decides
// whether a key is live: a read takes the key's sealed bytes in the
// statement that reads the flow, and finds it destroyed there, and a
// create's insert confirms in its own statement that the key it seals
// under is still the person's live key.
type keyCache struct {
	mu       sync.Mutex
	ids      map[string]subjectkey.Key
	subjects map[string]subjectkey.Key // by organization and subject
}

func newKeyCache() *keyCache {
	return &keyCache{ids: map[string]subjectkey.Key{}, subjects: map[string]subjectkey.Key{}}
}

func (c *keyCache) byID(id string) (subjectkey.Key, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.ids[id]
	return k, ok
}

func (c *keyCache) bySubject(person string) (subjectkey.Key, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.subjects[person]
	return k, ok
}

// put keeps k, by person too when person is set.
func (c *keyCache) put(person string, k subjectkey.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ids) >= maxCachedKeys || len(c.subjects) >= maxCachedKeys {
		clear(c.ids)
		clear(c.subjects)
	}
	c.ids[k.ID] = k
	if person != "" {
		c.subjects[person] = k
	}
}

// forgetPerson drops the key kept for person, which is no longer theirs.
func (c *keyCache) forgetPerson(person string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.subjects, person)
}

// forgetID drops the key id, seen destroyed, and the person it was kept for.
func (c *keyCache) forgetID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, id)
	for person, k := range c.subjects {
		if k.ID == id {
			delete(c.subjects, person)
		}
	}
}
