package flows

import (
	"github.com/flowd/flowd/internal/cache"
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
	ids      *cache.Map[string, *pii.Opener]
	subjects *cache.Map[string, subjectkey.Key] // by organization and subject
}

func newKeyCache() *keyCache {
	return &keyCache{ids: cache.New[string, *pii.Opener](maxCachedKeys),
		subjects: cache.New[string, subjectkey.Key](maxCachedKeys)}
}

func (c *keyCache) byID(id string) (*pii.Opener, bool) { return c.ids.Get(id) }

// putOpener keeps the opener of the key id.
func (c *keyCache) putOpener(id string, o *pii.Opener) { c.ids.Put(id, o) }

func (c *keyCache) bySubject(person string) (subjectkey.Key, bool) { return c.subjects.Get(person) }

// put keeps k as person's key.
func (c *keyCache) put(person string, k subjectkey.Key) { c.subjects.Put(person, k) }

// forgetPerson drops the key kept for person, which is no longer theirs.
func (c *keyCache) forgetPerson(person string) { c.subjects.Delete(person) }

// forgetID drops the key id, seen destroyed, and the person it was kept for.
func (c *keyCache) forgetID(id string) {
	c.ids.Delete(id)
	c.subjects.DeleteFunc(func(_ string, k subjectkey.Key) bool { return k.ID == id })
}
