package tokens

import (
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/testkit/testkeys"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens/internal/store"
)

// signJWT signs claims with key and alg, kid in the header when not empty.
func signJWT(t testing.TB, key any, alg jose.SignatureAlgorithm, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// assertionClaims are good claims of an assertion of clientID at now.
func assertionClaims(clientID string, now time.Time) map[string]any {
	return map[string]any{"iss": clientID, "sub": clientID, "aud": testIssuer + "/oauth/token",
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": newUUID()}
}

// keyClient makes an assertion-only client with keys.
func (f fixture) keyClient(t testing.TB, keys orgs.ClientKeys) orgs.ClientCredentials {
	t.Helper()
	cc, err := f.m.CreateClient(context.Background(), orgs.NewClient{OrganizationID: f.org.ID, Name: "Keys", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if cc.Secret != "" || cc.HasSecret {
		t.Fatalf("an assertion-only client got a secret: %+v", cc.Client)
	}
	return cc
}

// assertionToken asks for a token with a client assertion.
func (f fixture) assertionToken(m *instance, clientID, assertion string) (Token, error) {
	return assertionTokenFrom(m, "192.0.2.7", clientID, assertion)
}

// assertionTokenFrom asks for a token with a client assertion from addr.
func assertionTokenFrom(m *instance, addr, clientID, assertion string) (Token, error) {
	return m.Token(context.Background(), TokenRequest{GrantType: GrantClientCredentials, ClientAuth: ClientAuth{
		ClientID: clientID, AuthMethod: identity.AuthSecretPost, RemoteAddr: addr,
		ClientAssertionType: ClientAssertionType, ClientAssertion: assertion}})
}

// wantTokenError checks that err is a TokenError of code whose description contains desc.
func wantTokenError(t *testing.T, err error, code, desc string) {
	t.Helper()
	var te *TokenError
	if !errors.As(err, &te) || te.Code != code || !strings.Contains(te.Description, desc) {
		t.Fatalf("got %v, want %s containing %q", err, code, desc)
	}
}

func TestClientAssertion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ec, other := testkeys.EC(t), testkeys.EC(t)
	cc := f.keyClient(t, orgs.ClientKeys{JWKS: testkeys.JWKS(t, map[string]any{"ec1": ec, "rsa1": testkeys.RSA()})})
	hsKey, _ := json.Marshal(jose.JSONWebKey{Key: &testkeys.RSA().PublicKey})
	none := func(claims map[string]any) string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
		p, _ := json.Marshal(claims)
		return h + "." + base64.RawURLEncoding.EncodeToString(p) + "."
	}
	for _, tc := range []struct {
		name   string
		change func(c map[string]any)
		sign   func(c map[string]any) string
		want   string // a part of the error description; empty for success
	}{
		{name: "good ES256 with kid"},
		{name: "good RS256 without kid", sign: func(c map[string]any) string { return signJWT(t, testkeys.RSA(), jose.RS256, "", c) }},
		{name: "good PS256", sign: func(c map[string]any) string { return signJWT(t, testkeys.RSA(), jose.PS256, "rsa1", c) }},
		{name: "aud issuer", change: func(c map[string]any) { c["aud"] = testIssuer }},
		{name: "aud array", change: func(c map[string]any) { c["aud"] = []string{"https://other.test", testIssuer + "/oauth/token"} }},
		{name: "no iat", change: func(c map[string]any) { delete(c, "iat") }},
		{name: "aud other", change: func(c map[string]any) { c["aud"] = "https://other.test/token" }, want: "aud must be"},
		{name: "aud revocation endpoint", change: func(c map[string]any) { c["aud"] = testIssuer + "/oauth/revoke" }, want: "aud must be"},
		{name: "iss other", change: func(c map[string]any) { c["iss"] = "fc_other" }, want: "iss and sub"},
		{name: "sub other", change: func(c map[string]any) { c["sub"] = "fc_other" }, want: "differs from the client assertion's sub"},
		{name: "exp missing", change: func(c map[string]any) { delete(c, "exp") }, want: "must have exp"},
		{name: "exp past", change: func(c map[string]any) { c["exp"] = time.Now().Add(-time.Second).Unix() }, want: "expired"},
		{name: "iat future", change: func(c map[string]any) {
			c["iat"], c["exp"] = time.Now().Add(2*time.Minute).Unix(), time.Now().Add(3*time.Minute).Unix()
		}, want: "iat is in the future"},
		{name: "nbf future", change: func(c map[string]any) { c["nbf"] = time.Now().Add(time.Minute).Unix() }, want: "not valid yet"},
		{name: "jti missing", change: func(c map[string]any) { delete(c, "jti") }, want: "must have a jti"},
		{name: "lifetime too long", change: func(c map[string]any) { c["exp"] = time.Now().Add(6 * time.Minute).Unix() }, want: "lifetime"},
		{name: "lifetime too long without iat", change: func(c map[string]any) {
			delete(c, "iat")
			c["exp"] = time.Now().Add(6 * time.Minute).Unix()
		}, want: "lifetime"},
		{name: "wrong key", sign: func(c map[string]any) string { return signJWT(t, other, jose.ES256, "ec1", c) }, want: "signature does not verify"},
		{name: "wrong key without kid", sign: func(c map[string]any) string { return signJWT(t, other, jose.ES256, "", c) }, want: "signature does not verify"},
		{name: "unknown kid", sign: func(c map[string]any) string { return signJWT(t, ec, jose.ES256, "ec9", c) }, want: "No key of the client"},
		{name: "alg none", sign: none, want: "must be a JWT signed with RS256, PS256 or ES256"},
		{name: "HS256 with the public key as secret", sign: func(c map[string]any) string { return signJWT(t, hsKey, jose.HS256, "rsa1", c) },
			want: "must be a JWT signed with RS256, PS256 or ES256"},
		{name: "not a JWT", sign: func(map[string]any) string { return "not.a.jwt" }, want: "must be a JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claims := assertionClaims(cc.ID, time.Now())
			if tc.change != nil {
				tc.change(claims)
			}
			sign := tc.sign
			if sign == nil {
				sign = func(c map[string]any) string { return signJWT(t, ec, jose.ES256, "ec1", c) }
			}
			tok, err := f.assertionToken(f.m, cc.ID, sign(claims))
			if tc.want == "" {
				if err != nil || tok.AccessToken == "" {
					t.Fatalf("a good assertion: %v", err)
				}
				p, err := f.m.VerifyAccessToken(context.Background(), tok.AccessToken)
				if err != nil || p.ClientID != cc.ID {
					t.Fatalf("the token of an assertion: %+v %v", p, err)
				}
				return
			}
			wantTokenError(t, err, ErrCodeInvalidClient, tc.want)
		})
	}
}

func TestClientAssertionReplayAndMixing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ec := testkeys.EC(t)
	cc := f.keyClient(t, orgs.ClientKeys{JWKS: testkeys.JWKS(t, map[string]any{"k": ec})})
	assertion := signJWT(t, ec, jose.ES256, "k", assertionClaims(cc.ID, time.Now()))
	if _, err := f.assertionToken(f.m, "", assertion); err != nil {
		t.Fatalf("without client_id: %v", err)
	}
	// Another instance shares the record of used jti.
	_, err := f.assertionToken(f.another(t, nil), cc.ID, assertion)
	wantTokenError(t, err, ErrCodeInvalidClient, "already used")

	fresh := signJWT(t, ec, jose.ES256, "k", assertionClaims(cc.ID, time.Now()))
	for _, tc := range []struct {
		name string
		auth ClientAuth
		code string
	}{
		{"with a secret in the body", ClientAuth{ClientID: cc.ID, ClientSecret: "fcs_x", AuthMethod: identity.AuthSecretPost}, ErrCodeInvalidRequest},
		{"with Basic", ClientAuth{ClientID: cc.ID, ClientSecret: "fcs_x", AuthMethod: identity.AuthSecretBasic}, ErrCodeInvalidRequest},
		{"another client_id", ClientAuth{ClientID: f.client.ID, AuthMethod: identity.AuthSecretPost}, ErrCodeInvalidClient},
		{"wrong type", ClientAuth{ClientID: cc.ID, AuthMethod: identity.AuthSecretPost, ClientAssertionType: "urn:x"}, ErrCodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.auth.ClientAssertion = fresh
			if tc.auth.ClientAssertionType == "" {
				tc.auth.ClientAssertionType = ClientAssertionType
			}
			_, err := f.m.Token(context.Background(), TokenRequest{GrantType: GrantClientCredentials, ClientAuth: tc.auth})
			wantTokenError(t, err, tc.code, "")
		})
	}
	// The refused requests did not use the assertion up.
	if _, err := f.assertionToken(f.m, cc.ID, fresh); err != nil {
		t.Fatal(err)
	}
	// The sweep forgets the jti of expired assertions only.
	ctx := context.Background()
	if _, err := store.UseAssertionJTI(ctx, f.m.pool, cc.ID, "old", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.m.sweepOnce(ctx)
	var left []string
	rows, _ := f.m.pool.Query(ctx, "select jti from client_assertion_jtis where client_id = $1 order by jti", cc.ID)
	for rows.Next() {
		var j string
		_ = rows.Scan(&j)
		left = append(left, j)
	}
	if len(left) != 2 || strings.Contains(strings.Join(left, " "), "old") {
		t.Fatalf("after the sweep: %v", left)
	}
}

// jwksServer serves a key set that a test may change, counting fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	set     []byte
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T, set []byte) *jwksServer {
	s := &jwksServer{set: set}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/jwks", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.set)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(set []byte) {
	s.mu.Lock()
	s.set = set
	s.mu.Unlock()
}

// TestJWKSURI: keys come from the client's jwks_uri, cached; an unknown kid
// fetches again (the client rotated) when the set is older than 30
// seconds; a key replacement at flowd takes effect at once.
func TestJWKSURI(t *testing.T) {
	t.Parallel()
	first, second, third := testkeys.EC(t), testkeys.EC(t), testkeys.EC(t)
	srv := newJWKSServer(t, testkeys.JWKS(t, map[string]any{"one": first}))
	f := newFixture(t, func(c *testConfig) {
		c.ClientJWKSHosts = []string{"127.0.0.1"}
		c.JWKSHTTPClient = srv.Client()
		c.JWKSAllowPrivate = true
	})
	cc := f.keyClient(t, orgs.ClientKeys{JWKSURI: srv.URL + "/jwks"})
	assert := func(key *ecdsa.PrivateKey, kid string) error {
		_, err := f.assertionToken(f.m, cc.ID, signJWT(t, key, jose.ES256, kid, assertionClaims(cc.ID, f.clock.now())))
		return err
	}
	for range 2 {
		if err := assert(first, "one"); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for two assertions, want 1 (cached)", n)
	}
	srv.serve(testkeys.JWKS(t, map[string]any{"two": second}))
	wantTokenError(t, assert(second, "two"), ErrCodeInvalidClient, "No key of the client")
	f.clock.advance(31 * time.Second)
	if err := assert(second, "two"); err != nil {
		t.Fatalf("a rotated key, 31 seconds after the last fetch: %v", err)
	}
	srv.serve(testkeys.JWKS(t, map[string]any{"two": second, "three": third}))
	wantTokenError(t, assert(third, "three"), ErrCodeInvalidClient, "No key of the client")
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2: unknown kids within 30 seconds of a fetch fetch nothing", n)
	}
	f.clock.advance(31 * time.Second)
	if err := assert(third, "three"); err != nil {
		t.Fatalf("an unknown kid after 30 seconds: %v", err)
	}

	// The keys are replaced by inline ones: the URL's keys stop working.
	if _, err := f.m.ReplaceClientKeys(context.Background(), f.org.ID, cc.ID, orgs.ClientKeys{JWKS: testkeys.JWKS(t, map[string]any{"one": first})}); err != nil {
		t.Fatal(err)
	}
	wantTokenError(t, assert(third, "three"), ErrCodeInvalidClient, "No key")
	if err := assert(first, "one"); err != nil {
		t.Fatal(err)
	}

	// A redirect, an error status or a host no longer allowed fail the fetch.
	for _, tc := range []struct {
		name string
		uri  string
		cfg  func(*testConfig)
	}{
		{"redirect", srv.URL + "/redirect", nil},
		{"host no longer allowed", srv.URL + "/jwks", func(c *testConfig) { c.ClientJWKSHosts = []string{"keys.bank.example"} }},
	} {
		if _, err := f.m.ReplaceClientKeys(context.Background(), f.org.ID, cc.ID, orgs.ClientKeys{JWKSURI: tc.uri}); err != nil {
			t.Fatal(err)
		}
		m := f.m
		if tc.cfg != nil {
			m = f.another(t, tc.cfg)
		}
		_, err := f.assertionToken(m, cc.ID, signJWT(t, first, jose.ES256, "one", assertionClaims(cc.ID, f.clock.now())))
		wantTokenError(t, err, ErrCodeInvalidClient, "could not be obtained")
	}
}
