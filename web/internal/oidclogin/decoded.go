package oidclogin

import (
	"crypto/sha256"
	"maps"
	"net/http"

	"github.com/gorilla/sessions"

	"github.com/flowd/flowd/internal/cache"
)

// maxDecodedCookies bounds the cookies whose values a Sessions keeps.
const maxDecodedCookies = 1024

// decodedCookies are the values of the cookies a Sessions decoded lately,
// by the SHA-256 of the cookie: opening a cookie (its MAC, its decryption
// and gob) costs more than the rest of a session's check, and a browser
// sends the same cookie until the session is renewed. A cookie is the same
// bytes whenever it is sent, so its values are too; what ends a session
// (its timeouts, its record) is checked at every request as before. Keyed
// by a digest, a lookup tells nothing of how close a forged cookie came.
type decodedCookies struct {
	values *cache.Map[[sha256.Size]byte, map[any]any]
}

func newDecodedCookies() decodedCookies {
	return decodedCookies{values: cache.New[[sha256.Size]byte, map[any]any](maxDecodedCookies)}
}

// open returns the session of the request's cookie of store's name, as
// store.New does, and whether the cookie opened.
func (d *decodedCookies) open(store *sessions.CookieStore, name string, r *http.Request) (*sessions.Session, bool) {
	c, err := r.Cookie(name)
	if err != nil {
		return nil, false
	}
	key := sha256.Sum256([]byte(c.Value))
	if values, ok := d.values.Get(key); ok {
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
	d.values.Put(key, maps.Clone(raw.Values))
	return raw, true
}
