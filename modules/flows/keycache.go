package flows

import (
	"sync"

	"github.com/flowd/flowd/internal/pii"
	"github.com/flowd/flowd/modules/flows/internal/subjectkey"
)

// maxCachedKeys bounds the opened subject keys kept in memory, for reads
// and for creates each: each holds its expanded AES and GHASH tables.
const maxCachedKeys = 4096

// keyCache keeps opened subject keys, by id for reads (what opens alone)
// and by person for creates, so that neither opens a key it opened before. It never decides
// whether a key is live: a read takes the key's sealed bytes in the
// statement that reads the flow, and finds it destroyed there, and a
// create's insert confirms in its own statement that the key it seals
// under is still the person's live key.
type keyCache struct {
	mu       sync.Mutex
	ids      map[string]*pii.Opener
	subjects map[string]subjectkey.Key // by organization and subject
}

func newKeyCache() *keyCache {
	return &keyCache{ids: map[string]*pii.Opener{}, subjects: map[string]subjectkey.Key{}}
}

func (c *keyCache) byID(id string) (*pii.Opener, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.ids[id]
	return o, ok
}

// putOpener keeps the opener of the key id.
func (c *keyCache) putOpener(id string, o *pii.Opener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ids) >= maxCachedKeys {
		clear(c.ids)
	}
	c.ids[id] = o
}

func (c *keyCache) bySubject(person string) (subjectkey.Key, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.subjects[person]
	return k, ok
}

// put keeps k as person's key.
func (c *keyCache) put(person string, k subjectkey.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.subjects) >= maxCachedKeys {
		clear(c.subjects)
	}
	c.subjects[person] = k
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
