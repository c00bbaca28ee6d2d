package oidclogin

import (
	"crypto/sha256"
	"maps"
	"net/http"
	"sync"

	"github.com/gorilla/sessions"
)

// maxDecodedCookies bounds the cookies whose values a Sessions keeps; past
// it, one kept cookie makes room for each new one.
const maxDecodedCookies = 1024

// decodedCookies are the values of the cookies a Sessions decoded lately,
// by the SHA-256 of the cookie: opening a cookie (its MAC, its decryption
// and gob) costs more than the rest of a session's check, and a browser
// sends the same cookie until the session is renewed. A cookie is the same
// bytes whenever it is sent, so its values are too; what ends a session
// (its timeouts, its record) is checked at every request as before. Keyed
// by a digest, a lookup tells nothing of how close a forged cookie came.
type decodedCookies struct {
	mu     sync.Mutex
	values map[[sha256.Size]byte]map[any]any
}

// open returns the session of the request's cookie of store's name, as
// store.New does, and whether the cookie opened.
func (d *decodedCookies) open(store *sessions.CookieStore, name string, r *http.Request) (*sessions.Session, bool) {
	c, err := r.Cookie(name)
	if err != nil {
		return nil, false
	}
	key := sha256.Sum256([]byte(c.Value))
	d.mu.Lock()
	values, ok := d.values[key]
	d.mu.Unlock()
	if ok {
		raw := sessions.NewSession(store, name)
		opts := *store.Options
		raw.Options = &opts
		raw.Values = maps.Clone(values) // Get may change them
		return raw, true
	}
	raw, err := store.New(r, name)
	if err != nil || raw.IsNew {
		return nil, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.values == nil {
		d.values = map[[sha256.Size]byte]map[any]any{}
	}
	if len(d.values) >= maxDecodedCookies {
		for old := range d.values {
			delete(d.values, old)
			break
		}
	}
	d.values[key] = maps.Clone(raw.Values)
	return raw, true
}
