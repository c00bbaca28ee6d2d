package tokens

import (
	"context"
	"errors"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/netguard"
	"github.com/flowd/flowd/internal/testkit/testkeys"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// TestJWKSURIAddressGuard: a client's jwks_uri is fetched through the
// connect-time address guard of webhook deliveries. On a loopback address it
// is refused before any request is sent, even by an HTTP client that trusts
// the host's certificate, unless private addresses are allowed.
func TestJWKSURIAddressGuard(t *testing.T) {
	t.Parallel()
	key := testkeys.EC(t)
	srv := newJWKSServer(t, testkeys.JWKS(t, map[string]any{"one": key}))
	f := newFixture(t, func(c *testConfig) {
		c.ClientJWKSHosts = []string{"127.0.0.1"}
		c.JWKSHTTPClient = srv.Client()
	})
	cc := f.keyClient(t, orgs.ClientKeys{JWKSURI: srv.URL + "/jwks"})
	ctx := context.Background()

	_, err := f.m.clientKeySet(ctx, f.storedClient(t, cc.ID), false, &costGate{limiter: f.m.limiter, key: "192.0.2.1"})
	var blocked *netguard.BlockedError
	if !errors.As(err, &blocked) {
		t.Fatalf("fetching a jwks_uri on 127.0.0.1: %v, want the address guard's refusal", err)
	}
	_, err = f.assertionToken(f.m, cc.ID, signJWT(t, key, jose.ES256, "one", assertionClaims(cc.ID, f.clock.now())))
	wantTokenError(t, err, ErrCodeInvalidClient, "could not be obtained")
	if n := srv.fetches.Load(); n != 0 {
		t.Fatalf("the jwks_uri host got %d requests, want none: the guard refuses at connect time", n)
	}

	allowing := f.another(t, func(c *testConfig) { c.JWKSAllowPrivate = true })
	if _, err := f.assertionToken(allowing, cc.ID, signJWT(t, key, jose.ES256, "one", assertionClaims(cc.ID, f.clock.now()))); err != nil {
		t.Fatalf("with private addresses allowed: %v", err)
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("the jwks_uri host got %d requests with private addresses allowed, want 1", n)
	}
}
