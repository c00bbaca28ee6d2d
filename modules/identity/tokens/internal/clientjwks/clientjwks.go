// Package clientjwks fetches the key sets at clients' jwks_uri, through
// the address guard of webhook deliveries, and caches them per client.
package clientjwks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/cache"
	"github.com/flowd/flowd/internal/netguard"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// Bounds of the key sets fetched from clients' jwks_uri.
const (
	FetchTimeout = 5 * time.Second
	cacheTTL     = 5 * time.Minute
	// refetchEvery bounds the refetches an unknown kid forces, so that
	// assertions with made-up kids cannot make flowd hammer the client's host.
	refetchEvery = 30 * time.Second
)

// maxCachedSets bounds the clients whose key sets an instance keeps.
const maxCachedSets = 4096

// Cache holds the key sets fetched from clients' jwks_uri, per client
// and URL, on this instance.
type Cache struct {
	entries *cache.Map[string, entry] // by client id
}

type entry struct {
	uri       string
	keys      []jose.JSONWebKey
	fetchedAt time.Time
}

// NewCache returns an empty cache of key sets.
func NewCache() Cache { return Cache{entries: cache.New[string, entry](maxCachedSets)} }

// Get returns the set cached for a client at uri when it is fresh and,
// when force is set (a kid the cached set lacks), too recent to refetch.
func (c Cache) Get(clientID, uri string, force bool, now time.Time) ([]jose.JSONWebKey, bool) {
	e, ok := c.entries.Get(clientID)
	if !ok || e.uri != uri {
		return nil, false
	}
	fresh := now.Sub(e.fetchedAt) < cacheTTL
	if fresh && (!force || now.Sub(e.fetchedAt) < refetchEvery) {
		return e.keys, true
	}
	return nil, false
}

// Put caches the set fetched for a client from uri at now.
func (c Cache) Put(clientID, uri string, keys []jose.JSONWebKey, now time.Time) {
	c.entries.Put(clientID, entry{uri: uri, keys: keys, fetchedAt: now})
}

// Forget drops a client's set.
func (c Cache) Forget(clientID string) { c.entries.Delete(clientID) }

// NewHTTPClient returns the client that fetches jwks_uri: base (a plain client
// when nil) with its TLS settings kept, connecting only through the address
// guard of webhook deliveries unless allowPrivate, with no proxy from the
// environment (a proxy would hide the real destination from the guard), and
// following no redirects (they could lead off the allow-list); wrap, when
// set, wraps the transport.
func NewHTTPClient(base *http.Client, allowPrivate bool, wrap func(http.RoundTripper) http.RoundTripper) *http.Client {
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	t, ok := c.Transport.(*http.Transport)
	if !ok {
		t = http.DefaultTransport.(*http.Transport)
	}
	t = t.Clone()
	t.Proxy = nil
	t.DialContext, t.DialTLSContext = netguard.NewDialer(FetchTimeout, allowPrivate).DialContext, nil
	c.Transport = t
	if wrap != nil {
		c.Transport = wrap(t)
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// Fetch gets a key set from a client's jwks_uri with client (made by
// NewHTTPClient): the host must still be one of allowedHosts, and the
// answer must be a valid set within orgs.MaxJWKSSize, in FetchTimeout.
func Fetch(ctx context.Context, client *http.Client, uri string, allowedHosts []string) ([]jose.JSONWebKey, error) {
	if err := orgs.CheckJWKSURI(uri, allowedHosts); err != nil {
		return nil, fmt.Errorf("jwks_uri %s: %w", uri, err)
	}
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching jwks_uri %s: %w", uri, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks_uri %s answered %s", uri, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, orgs.MaxJWKSSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading jwks_uri %s: %w", uri, err)
	}
	if len(body) > orgs.MaxJWKSSize {
		return nil, fmt.Errorf("jwks_uri %s: the key set is larger than %d KiB", uri, orgs.MaxJWKSSize>>10)
	}
	set, err := orgs.ParseJWKS(body)
	if err != nil {
		return nil, fmt.Errorf("jwks_uri %s: %w", uri, err)
	}
	return set, nil
}
