package tokens

import (
	"context"
	"fmt"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/internal/testkit/testkeys"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
)

// secretToken asks for a token with a client secret from addr.
func secretToken(m *instance, addr, clientID, secret string) (Token, error) {
	return m.Token(context.Background(), TokenRequest{GrantType: GrantClientCredentials,
		ClientAuth: ClientAuth{ClientID: clientID, ClientSecret: secret, AuthMethod: identity.AuthSecretBasic, RemoteAddr: addr}})
}

// legacyClient makes a client whose secret has only its argon2id hash, as
// one stored before secrets had MACs.
func (f fixture) legacyClient(t *testing.T) orgs.ClientCredentials {
	t.Helper()
	cc, err := f.m.CreateClient(context.Background(), orgs.NewClient{OrganizationID: f.org.ID, Name: "Legacy"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.pool.Exec(context.Background(), "update api_clients set secret_mac = null where id = $1", cc.ID); err != nil {
		t.Fatal(err)
	}
	return cc
}

// storedClient reads a client's row.
func (f fixture) storedClient(t *testing.T, id string) orgs.StoredClient {
	t.Helper()
	c, err := f.m.StoredClient(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFailuresLockNoClientOut: a hundred wrong secrets and bad assertions
// naming a client, from a hundred other addresses and from the client's own,
// leave its right secret and its good assertion working.
func TestFailuresLockNoClientOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	key, forger := testkeys.EC(t), testkeys.EC(t)
	keyed := f.keyClient(t, orgs.ClientKeys{JWKS: testkeys.JWKS(t, map[string]any{"k": key})})
	const own = "198.51.100.7"
	for i := range 100 {
		for _, addr := range []string{fmt.Sprintf("203.0.113.%d", i), own} {
			_, err := secretToken(f.m, addr, f.client.ID, orgs.NewClientSecret())
			wantTokenError(t, err, ErrCodeInvalidClient, "Client authentication failed.")
			_, err = assertionTokenFrom(f.m, addr, keyed.ID, signJWT(t, forger, jose.ES256, "k", assertionClaims(keyed.ID, f.clock.now())))
			wantTokenError(t, err, ErrCodeInvalidClient, "signature does not verify")
			// The assertion-only client has no secret to guess.
			_, err = secretToken(f.m, addr, keyed.ID, orgs.NewClientSecret())
			wantTokenError(t, err, ErrCodeInvalidClient, "Client authentication failed.")
			_, err = assertionTokenFrom(f.m, addr, "", "not a JWT")
			wantTokenError(t, err, ErrCodeInvalidClient, "must be a JWT")
		}
	}
	if _, err := secretToken(f.m, own, f.client.ID, f.client.Secret); err != nil {
		t.Fatalf("the right secret after 200 wrong ones: %v", err)
	}
	if _, err := assertionTokenFrom(f.m, own, keyed.ID, signJWT(t, key, jose.ES256, "k", assertionClaims(keyed.ID, f.clock.now()))); err != nil {
		t.Fatalf("a good assertion after 200 bad ones: %v", err)
	}
}

// TestCostlyChecksAreBoundedPerClientAndAddress: a secret without a MAC
// costs an argon2id, which a client's guesser may fail AddressFailureLimit
// times a window from one address; then that client's costly checks from
// there wait, its cheap ones do not, and other addresses are not affected.
// A successful check stores the MAC, after which the secret is checked
// cheaply from anywhere.
func TestCostlyChecksAreBoundedPerClientAndAddress(t *testing.T) {
	t.Parallel()
	const limit = 5
	f := newFixture(t, func(c *testConfig) { c.AddressFailureLimit = limit })
	legacy := f.legacyClient(t)
	const guesser, other = "203.0.113.9", "198.51.100.7"
	for range limit {
		_, err := secretToken(f.m, guesser, legacy.ID, orgs.NewClientSecret())
		wantTokenError(t, err, ErrCodeInvalidClient, "Client authentication failed.")
	}
	for range 100 {
		_, err := secretToken(f.m, guesser, legacy.ID, orgs.NewClientSecret())
		wantTokenError(t, err, ErrCodeSlowDown, "of this client from this address")
		if te := err.(*TokenError); te.RetryAfter <= 0 || te.RetryAfter > time.Minute {
			t.Fatalf("Retry-After %v, want within the minute's window", te.RetryAfter)
		}
	}
	// The right secret without a MAC cannot be told apart without argon2id: it waits too.
	_, err := secretToken(f.m, guesser, legacy.ID, legacy.Secret)
	wantTokenError(t, err, ErrCodeSlowDown, "")
	// Secrets with a MAC cost nothing worth limiting.
	if _, err := secretToken(f.m, guesser, f.client.ID, f.client.Secret); err != nil {
		t.Fatalf("a client with a MAC from the limited address: %v", err)
	}
	_, err = secretToken(f.m, guesser, f.client.ID, orgs.NewClientSecret())
	wantTokenError(t, err, ErrCodeInvalidClient, "")

	// Another address checks the legacy secret, which stores its MAC.
	if _, err := secretToken(f.m, other, legacy.ID, legacy.Secret); err != nil {
		t.Fatalf("from another address: %v", err)
	}
	if c := f.storedClient(t, legacy.ID); !f.m.macs.Current(c.SecretMAC, c.SecretHash) {
		t.Fatalf("no current MAC after the legacy secret was checked: %x", c.SecretMAC)
	}
	if _, err := secretToken(f.m, guesser, legacy.ID, legacy.Secret); err != nil {
		t.Fatalf("the upgraded secret from the limited address: %v", err)
	}
	_, err = secretToken(f.m, guesser, legacy.ID, orgs.NewClientSecret())
	wantTokenError(t, err, ErrCodeInvalidClient, "")

	// The addresses of one IPv6 /64 count together.
	second := f.legacyClient(t)
	for i := range limit {
		_, err := secretToken(f.m, fmt.Sprintf("2001:db8:1:2::%x", i+1), second.ID, orgs.NewClientSecret())
		wantTokenError(t, err, ErrCodeInvalidClient, "")
	}
	_, err = secretToken(f.m, "2001:db8:1:2:ffff::1", second.ID, orgs.NewClientSecret())
	wantTokenError(t, err, ErrCodeSlowDown, "")
	_, err = secretToken(f.m, "2001:db8:1:3::1", second.ID, orgs.NewClientSecret())
	wantTokenError(t, err, ErrCodeInvalidClient, "")

	// Successes give their slot back; the window's end gives the rest.
	f.clock.advance(time.Minute)
	third := f.legacyClient(t)
	for range limit - 1 {
		_, err := secretToken(f.m, guesser, third.ID, orgs.NewClientSecret())
		wantTokenError(t, err, ErrCodeInvalidClient, "")
	}
	if _, err := secretToken(f.m, guesser, third.ID, third.Secret); err != nil {
		t.Fatalf("a legacy secret after the window: %v", err)
	}
	_, err = secretToken(f.m, guesser, second.ID, orgs.NewClientSecret())
	wantTokenError(t, err, ErrCodeInvalidClient, "")
}

// TestOthersFailuresDoNotHoldUpAClientWithoutAMAC: behind a load balancer
// flowd does not trust, every caller has one address. From it, 30 wrong
// secrets (the default limit) for each of another client without a MAC,
// a client with one and client ids that do not exist, and 30 for the client
// itself from other addresses, leave the right secret of a client without a
// MAC answering a token from that address, not 429; that success gives it
// its MAC, after which no number of wrong secrets in its name from the
// address holds it up.
func TestOthersFailuresDoNotHoldUpAClientWithoutAMAC(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	legacy, neighbour := f.legacyClient(t), f.legacyClient(t)
	const balancer = "10.0.0.1"
	for i := range 30 {
		for _, id := range []string{neighbour.ID, f.client.ID, fmt.Sprintf("no-such-client-%d", i)} {
			_, err := secretToken(f.m, balancer, id, orgs.NewClientSecret())
			wantTokenError(t, err, ErrCodeInvalidClient, "Client authentication failed.")
		}
		_, err := secretToken(f.m, fmt.Sprintf("203.0.113.%d", i), legacy.ID, orgs.NewClientSecret())
		wantTokenError(t, err, ErrCodeInvalidClient, "Client authentication failed.")
	}
	// The neighbour's own guesser is held up, only for it.
	_, err := secretToken(f.m, balancer, neighbour.ID, orgs.NewClientSecret())
	wantTokenError(t, err, ErrCodeSlowDown, "")
	if c := f.storedClient(t, legacy.ID); f.m.macs.Current(c.SecretMAC, c.SecretHash) {
		t.Fatal("the client without a MAC has one before its first success")
	}
	if _, err := secretToken(f.m, balancer, legacy.ID, legacy.Secret); err != nil {
		t.Fatalf("the right secret of a client without a MAC, after others' failures from its address: %v", err)
	}
	if c := f.storedClient(t, legacy.ID); !f.m.macs.Current(c.SecretMAC, c.SecretHash) {
		t.Fatal("no MAC after the client's first successful authentication")
	}
	for range 100 {
		_, err := secretToken(f.m, balancer, legacy.ID, orgs.NewClientSecret())
		wantTokenError(t, err, ErrCodeInvalidClient, "Client authentication failed.")
	}
	if _, err := secretToken(f.m, balancer, legacy.ID, legacy.Secret); err != nil {
		t.Fatalf("the right secret after 100 wrong ones in its name from its address: %v", err)
	}
}

// TestSecretMACFollowsTheHash: new and rotated secrets have a MAC; a hash
// changed without its MAC (by an earlier version of flowd), or a MAC under
// another key, leaves the hash to decide, and the MAC is made again.
func TestSecretMACFollowsTheHash(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	if c := f.storedClient(t, f.client.ID); !f.m.macs.Current(c.SecretMAC, c.SecretHash) {
		t.Fatalf("a new client's MAC is not current: %x", c.SecretMAC)
	}
	rotated, err := f.m.RotateClientSecret(ctx, f.org.ID, f.client.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := f.storedClient(t, f.client.ID); !f.m.macs.Current(c.SecretMAC, c.SecretHash) {
		t.Fatalf("a rotated secret's MAC is not current: %x", c.SecretMAC)
	}
	next := orgs.NewClientSecret()
	if _, err := f.m.pool.Exec(ctx, "update api_clients set secret_hash = $2 where id = $1", f.client.ID, mustHash(t, next)); err != nil {
		t.Fatal(err)
	}
	_, err = secretToken(f.m, "192.0.2.1", f.client.ID, rotated.Secret)
	wantTokenError(t, err, ErrCodeInvalidClient, "")
	if _, err := secretToken(f.m, "192.0.2.1", f.client.ID, next); err != nil {
		t.Fatalf("the secret of the changed hash: %v", err)
	}
	if c := f.storedClient(t, f.client.ID); !f.m.macs.Current(c.SecretMAC, c.SecretHash) || !f.m.macs.Matches(c.SecretMAC, next) {
		t.Fatalf("the MAC was not made again: %x", c.SecretMAC)
	}

	// Under another key the MAC is stale too: the hash decides, and the
	// MAC is made under that key.
	other := f.another(t, func(c *testConfig) { c.KeyEncryptionKey = make([]byte, 32) })
	check := func(m *instance, secret string) error {
		return m.checkSecret(ctx, f.storedClient(t, f.client.ID), secret, &costGate{limiter: m.limiter, key: "192.0.2.1"})
	}
	if err := check(other, next); err != nil {
		t.Fatalf("under another key: %v", err)
	}
	if err := check(other, rotated.Secret); err == nil {
		t.Fatal("under another key, the previous secret passed")
	}
	if c := f.storedClient(t, f.client.ID); f.m.macs.Current(c.SecretMAC, c.SecretHash) || !other.macs.Current(c.SecretMAC, c.SecretHash) {
		t.Fatalf("the MAC was not made again under the other key: %x", c.SecretMAC)
	}
	if _, err := secretToken(f.m, "192.0.2.1", f.client.ID, next); err != nil {
		t.Fatalf("back under the first key: %v", err)
	}
}

// TestJWKSFetchesAreBoundedPerClientAndAddress: an assertion that makes
// flowd fetch the client's jwks_uri is costly: an address whose fetches for
// a client fail AddressFailureLimit times waits for the window before it
// may cause another for it, while a good assertion with the keys at hand
// passes from it.
func TestJWKSFetchesAreBoundedPerClientAndAddress(t *testing.T) {
	t.Parallel()
	const limit = 3
	key := testkeys.EC(t)
	srv := newJWKSServer(t, []byte("down for maintenance"))
	f := newFixture(t, func(c *testConfig) {
		c.AddressFailureLimit = limit
		c.ClientJWKSHosts = []string{"127.0.0.1"}
		c.JWKSHTTPClient = srv.Client()
		c.JWKSAllowPrivate = true
	})
	cc := f.keyClient(t, orgs.ClientKeys{JWKSURI: srv.URL + "/jwks"})
	const guesser, other = "203.0.113.9", "198.51.100.7"
	assertion := func() string { return signJWT(t, key, jose.ES256, "k", assertionClaims(cc.ID, f.clock.now())) }
	for range limit {
		_, err := assertionTokenFrom(f.m, guesser, cc.ID, assertion())
		wantTokenError(t, err, ErrCodeInvalidClient, "could not be obtained")
	}
	for range 20 {
		_, err := assertionTokenFrom(f.m, guesser, cc.ID, assertion())
		wantTokenError(t, err, ErrCodeSlowDown, "")
	}
	if n := srv.fetches.Load(); n != limit {
		t.Fatalf("%d fetches from one address, want %d", n, limit)
	}
	srv.serve(testkeys.JWKS(t, map[string]any{"k": key}))
	if _, err := assertionTokenFrom(f.m, other, cc.ID, assertion()); err != nil {
		t.Fatalf("from another address: %v", err)
	}
	if _, err := assertionTokenFrom(f.m, guesser, cc.ID, assertion()); err != nil {
		t.Fatalf("with the keys cached, from the limited address: %v", err)
	}
	// A made-up kid fetches again once the set is 30 seconds old; from
	// the limited address, within its window, it waits.
	f.clock.advance(31 * time.Second)
	_, err := assertionTokenFrom(f.m, guesser, cc.ID, signJWT(t, key, jose.ES256, "made-up", assertionClaims(cc.ID, f.clock.now())))
	wantTokenError(t, err, ErrCodeSlowDown, "")
	if n := srv.fetches.Load(); n != limit+1 {
		t.Fatalf("%d fetches, want %d", n, limit+1)
	}
}

// BenchmarkAuthenticateClient is the check of a right secret that every
// token request makes: the client's row, then its secret.
func BenchmarkAuthenticateClient(b *testing.B) {
	f := newFixture(b, nil)
	ctx := context.Background()
	req := ClientAuth{ClientID: f.client.ID, ClientSecret: f.client.Secret, AuthMethod: identity.AuthSecretBasic, RemoteAddr: "192.0.2.1"}
	for b.Loop() {
		if _, err := f.m.authenticateClient(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckSecret is the secret's part of it, the row at hand.
func BenchmarkCheckSecret(b *testing.B) {
	f := newFixture(b, nil)
	ctx := context.Background()
	c, err := f.m.StoredClient(ctx, f.client.ID)
	if err != nil {
		b.Fatal(err)
	}
	gate := &costGate{limiter: f.m.limiter, key: "192.0.2.1"}
	for b.Loop() {
		if err := f.m.checkSecret(ctx, c, f.client.Secret, gate); err != nil {
			b.Fatal(err)
		}
	}
}

// mustHash hashes a secret as orgs hashes new ones in tests.
func mustHash(t *testing.T, secret string) string {
	t.Helper()
	h, err := secrethash.Hash(secret, secrethash.Cheap)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
