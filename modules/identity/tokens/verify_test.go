package tokens

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/keys"
	"github.com/flowd/flowd/modules/identity/orgs"
)

func TestVerifyAcceptsTheProvidersTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tok := f.token(t)
	for range 2 { // the second time from the cache
		p, err := f.m.VerifyAccessToken(context.Background(), tok.AccessToken)
		if err != nil {
			t.Fatal(err)
		}
		if p.OrganizationID != f.org.ID || p.ClientID != f.client.ID || strings.Join(p.Scopes, " ") != "flows:read flows:write" || p.Sandbox {
			t.Fatalf("principal %+v", p)
		}
	}
	// The claims every built-in access token carries.
	parts := strings.Split(tok.AccessToken, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c map[string]any
	_ = json.Unmarshal(payload, &c)
	for _, k := range []string{"iss", "sub", "client_id", "aud", "exp", "iat", "jti", "scope", "org_id"} {
		if c[k] == nil || c[k] == "" {
			t.Errorf("claim %s missing: %s", k, payload)
		}
	}
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if !strings.Contains(string(header), `"kid"`) || !strings.Contains(string(header), `"ES256"`) {
		t.Errorf("header %s", header)
	}
}

func TestVerifyRefusesBadTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	good := f.sign(t, f.claims())
	if _, err := f.m.VerifyAccessToken(context.Background(), good); err != nil {
		t.Fatalf("control token refused: %v", err)
	}
	kid := f.accessKid(t)
	pubKey, err := f.m.AccessTokenKey(context.Background(), kid)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(pubKey)
	pubJWK, _ := json.Marshal(jose.JSONWebKey{Key: pubKey, KeyID: kid})

	parts := strings.Split(good, ".")
	tampered := with(f.claims(), "org_id", "00000000-0000-0000-0000-000000000000")
	tp, _ := json.Marshal(tampered)
	tamperedToken := parts[0] + "." + base64.RawURLEncoding.EncodeToString(tp) + "." + parts[2]

	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."

	hmac := func(key []byte) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: key},
			(&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(f.claims())
		jws, _ := signer.Sign(b)
		raw, _ := jws.CompactSerialize()
		return raw
	}
	other, _ := ecdsa.GenerateKey(pubKey.Curve, rand.Reader)
	foreignSigner, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: other, KeyID: kid}}, nil)
	b, _ := json.Marshal(f.claims())
	foreignJWS, _ := foreignSigner.Sign(b)
	foreign, _ := foreignJWS.CompactSerialize()

	tests := []struct {
		name, raw string
	}{
		{"expired", f.sign(t, with(f.claims(), "exp", f.clock.now().Add(-time.Second).Unix()))},
		{"wrong audience", f.sign(t, with(f.claims(), "aud", "someone-else"))},
		{"wrong issuer", f.sign(t, with(f.claims(), "iss", "https://evil.test"))},
		{"issuer with a trailing slash", f.sign(t, with(f.claims(), "iss", testIssuer+"/"))},
		{"no org_id", f.sign(t, with(f.claims(), "org_id", ""))},
		{"another organization", f.sign(t, with(f.claims(), "org_id", "00000000-0000-0000-0000-000000000000"))},
		{"unknown client", f.sign(t, with(with(f.claims(), "client_id", "fc_nobody"), "sub", "fc_nobody"))},
		{"sub differs from client_id", f.sign(t, with(f.claims(), "sub", "fc_nobody"))},
		{"tampered payload", tamperedToken},
		{"alg none", none},
		{"HS256 keyed with the public key (DER)", hmac(pubDER)},
		{"HS256 keyed with the public key (JWK)", hmac(pubJWK)},
		{"signed by another key with our kid", foreign},
		{"garbage", "not.a.token"},
		{"empty", ""},
		{"huge", strings.Repeat("a", 20000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertInvalid(t, f.m, tt.raw, tt.name)
		})
	}
}

func TestVerifyRefusesAnExpiredIssuedToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tok := f.token(t)
	if _, err := f.m.VerifyAccessToken(context.Background(), tok.AccessToken); err != nil {
		t.Fatal(err)
	}
	f.clock.advance(identity.AccessTokenTTL + time.Second)
	assertInvalid(t, f.m, tok.AccessToken, "token past its exp (cached before)")
}

func TestRevokedClientsTokensStopAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	tok := f.token(t)
	if _, err := f.m.VerifyAccessToken(ctx, tok.AccessToken); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.RevokeClient(ctx, f.org.ID, f.client.ID); err != nil {
		t.Fatal(err)
	}
	assertInvalid(t, f.m, tok.AccessToken, "revoked client's token")
	_, err := f.m.Token(ctx, TokenRequest{GrantType: GrantClientCredentials, ClientAuth: ClientAuth{ClientID: f.client.ID, ClientSecret: f.client.Secret}})
	if te, ok := err.(*TokenError); !ok || te.Code != ErrCodeInvalidClient {
		t.Fatalf("revoked client asks for a token: %v", err)
	}
}

// TestRevocationReachesOtherInstances runs a second instance that caches the
// client's state while it listens for changes: the revocation made through
// the first must reach it.
func TestRevocationReachesOtherInstances(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	other := f.another(t, nil)
	other.run(t)
	waitFor(t, "the listener", other.feed.Listening)

	tok := f.token(t)
	for range 2 {
		p, err := other.VerifyAccessToken(ctx, tok.AccessToken)
		if err != nil || p.Sandbox {
			t.Fatalf("%+v %v", p, err)
		}
	}
	// A change no one announces is not seen: the state comes from memory.
	if _, err := f.m.pool.Exec(ctx, "update api_clients set sandbox = true where id = $1", f.client.ID); err != nil {
		t.Fatal(err)
	}
	if p, err := other.VerifyAccessToken(ctx, tok.AccessToken); err != nil || p.Sandbox {
		t.Fatalf("the listening instance does not cache the client's state: %+v %v", p, err)
	}
	if _, err := f.m.RevokeClient(ctx, f.org.ID, f.client.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the revocation to reach the other instance", func() bool {
		_, err := other.VerifyAccessToken(ctx, tok.AccessToken)
		return err != nil
	})
	assertInvalid(t, other, tok.AccessToken, "revoked on another instance")
}

func TestRotatedKeysTokensLiveOutTheirGraceOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	// A token that outlives the grace, as only a forger holding the key could make.
	long := f.sign(t, with(f.claims(), "exp", f.clock.now().Add(3*time.Hour).Unix()))
	before := f.token(t)
	oldKid := f.accessKid(t)
	made, err := f.m.RotateSigningKeys(ctx)
	if err != nil || len(made) != 3 || made[0].Algorithm != string(keys.AccessTokenAlgorithm) || made[0].ID == oldKid || !made[2].Receipts {
		t.Fatalf("rotate: %+v %v", made, err)
	}
	newKid := made[0].ID
	after := f.token(t)
	if kidOf(after.AccessToken) != newKid || kidOf(before.AccessToken) != oldKid {
		t.Fatalf("kids: before %s after %s, keys %s %s", kidOf(before.AccessToken), kidOf(after.AccessToken), oldKid, newKid)
	}
	jwks, err := f.m.JWKS(ctx)
	if err != nil || !strings.Contains(string(jwks), oldKid) || !strings.Contains(string(jwks), newKid) {
		t.Fatalf("JWKS during the grace: %s %v", jwks, err)
	}
	for _, raw := range []string{before.AccessToken, after.AccessToken, long} {
		if _, err := f.m.VerifyAccessToken(ctx, raw); err != nil {
			t.Fatalf("token refused during the grace: %v", err)
		}
	}
	f.clock.advance(f.m.Grace() + time.Second)
	assertInvalid(t, f.m, long, "token of a key retired longer ago than the grace")
	assertInvalid(t, f.another(t, nil), long, "token of a key retired longer ago than the grace (reloaded keys)")
}

// TestPrepareAddsTheMissingAlgorithm starts from a database whose only key
// is the ES256 one (as before RS256 ID tokens): Prepare adds an RS256 key and
// keeps the ES256 key and its tokens.
func TestPrepareAddsTheMissingAlgorithm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	tok := f.token(t)
	var n int
	if err := f.m.pool.QueryRow(ctx, "select count(*) from signing_keys").Scan(&n); err != nil || n != 1 {
		t.Fatalf("keys before Prepare: %d %v", n, err)
	}
	if err := f.m.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := f.m.pool.Query(ctx, "select id, algorithm, false from signing_keys where retired_at is null and purpose = 'token' order by algorithm")
	if err != nil {
		t.Fatal(err)
	}
	active, err := pgx.CollectRows(rows, pgx.RowToStructByPos[keys.SigningKey])
	if err != nil || len(active) != 2 || active[0].Algorithm != "ES256" || active[0].ID != kidOf(tok.AccessToken) || active[1].Algorithm != "RS256" {
		t.Fatalf("active keys after Prepare: %+v %v", active, err)
	}
	if _, err := f.m.VerifyAccessToken(ctx, tok.AccessToken); err != nil {
		t.Fatalf("access token of the kept ES256 key: %v", err)
	}
}

func kidOf(raw string) string {
	h, _ := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
	var v struct {
		Kid string `json:"kid"`
	}
	_ = json.Unmarshal(h, &v)
	return v.Kid
}

func TestRefreshTokenReuseRevokesTheFamily(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	first := f.token(t)
	refresh := func(rt string) (Token, error) {
		return f.m.Token(ctx, TokenRequest{GrantType: GrantRefreshToken, ClientAuth: ClientAuth{ClientID: f.client.ID, ClientSecret: f.client.Secret}, RefreshToken: rt})
	}
	second, err := refresh(first.RefreshToken)
	if err != nil || second.RefreshToken == first.RefreshToken || second.AccessToken == "" {
		t.Fatalf("refresh: %+v %v", second, err)
	}
	// first is used: presenting it again revokes the family, second included.
	if _, err := refresh(first.RefreshToken); !isGrantError(err) {
		t.Fatalf("reused refresh token: %v", err)
	}
	if _, err := refresh(second.RefreshToken); !isGrantError(err) {
		t.Fatalf("the successor of a reused token still works: %v", err)
	}
	// Another family of the same client is untouched.
	other := f.token(t)
	if _, err := refresh(other.RefreshToken); err != nil {
		t.Fatalf("an unrelated family was revoked: %v", err)
	}
}

func TestRefreshTokensExpireAndDieWithTheSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	refresh := func(secret, rt string) error {
		_, err := f.m.Token(ctx, TokenRequest{GrantType: GrantRefreshToken, ClientAuth: ClientAuth{ClientID: f.client.ID, ClientSecret: secret}, RefreshToken: rt})
		return err
	}
	old := f.token(t)
	f.clock.advance(identity.RefreshTokenTTL - time.Second)
	young := f.token(t)
	f.clock.advance(2 * time.Second)
	if err := refresh(f.client.Secret, old.RefreshToken); !isGrantError(err) {
		t.Fatalf("expired refresh token: %v", err)
	}
	rotated, err := f.m.RotateClientSecret(ctx, f.org.ID, f.client.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := refresh(f.client.Secret, young.RefreshToken); err == nil {
		t.Fatal("the old secret still authenticates")
	}
	if err := refresh(rotated.Secret, young.RefreshToken); !isGrantError(err) {
		t.Fatalf("refresh token issued before the secret was rotated: %v", err)
	}
}

func isGrantError(err error) bool {
	te, ok := err.(*TokenError)
	return ok && te.Code == ErrCodeInvalidGrant
}

// externalIssuer is a small OIDC issuer: discovery, JWKS and a signing key.
type externalIssuer struct {
	url string
	key *rsa.PrivateKey
}

func startExternalIssuer(t *testing.T) *externalIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	x := &externalIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": x.url, "jwks_uri": x.url + "/keys", "token_endpoint": x.url + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "ext-1", Algorithm: "RS256", Use: "sig"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	x.url = srv.URL
	return x
}

func (x *externalIssuer) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: x.key, KeyID: "ext-1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, _ := s.Sign(b)
	raw, _ := jws.CompactSerialize()
	return raw
}

func TestExternalIssuersTokens(t *testing.T) {
	t.Parallel()
	x := startExternalIssuer(t)
	f := newFixture(t, func(c *testConfig) {
		c.ExternalIssuer = x.url
		c.OrgClaim = "tenant"
	})
	ctx := context.Background()
	if _, err := f.m.MapExternalClient(ctx, orgs.ExternalClient{Issuer: x.url, ClientID: "dex-app", OrganizationID: f.org.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.MapExternalClient(ctx, orgs.ExternalClient{Issuer: x.url, ClientID: "azp-app", OrganizationID: f.org.ID,
		Scopes: []string{identity.ScopeFlowsRead}, Sandbox: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	base := func() map[string]any {
		return map[string]any{"iss": x.url, "sub": "svc", "exp": now.Add(5 * time.Minute).Unix(), "iat": now.Unix()}
	}
	tests := []struct {
		name    string
		claims  map[string]any
		org     string
		client  string
		scopes  string
		sandbox bool
	}{
		{"org claim and flowd audience", with(with(with(with(base(), "aud", "flowd"), "tenant", f.org.ID), "scope", "openid flows:read"), "client_id", "kc-1"),
			f.org.ID, "kc-1", "flows:read", false},
		{"client id only in aud, mapped (Dex)", with(base(), "aud", "dex-app"), f.org.ID, "dex-app", strings.Join(identity.AllScopes, " "), false},
		{"client id from azp, mapped", with(with(with(base(), "aud", []string{"flowd", "account"}), "azp", "azp-app"), "scp", []string{"flows:read", "flows:write"}),
			f.org.ID, "azp-app", "flows:read", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := f.m.VerifyAccessToken(ctx, x.sign(t, tt.claims))
			if err != nil {
				t.Fatal(err)
			}
			if p.OrganizationID != tt.org || p.ClientID != tt.client || strings.Join(p.Scopes, " ") != tt.scopes || p.Sandbox != tt.sandbox {
				t.Fatalf("principal %+v", p)
			}
		})
	}

	hs, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: x509.MarshalPKCS1PublicKey(&x.key.PublicKey)},
		(&jose.SignerOptions{}).WithHeader("kid", "ext-1"))
	hb, _ := json.Marshal(with(with(base(), "aud", "flowd"), "tenant", f.org.ID))
	hjws, _ := hs.Sign(hb)
	hsToken, _ := hjws.CompactSerialize()

	refused := []struct {
		name string
		raw  string
	}{
		{"unmapped client in aud, no org claim", x.sign(t, with(base(), "aud", "stranger"))},
		{"org claim but another audience", x.sign(t, with(with(base(), "aud", "stranger"), "tenant", f.org.ID))},
		{"unknown organization", x.sign(t, with(with(base(), "aud", "flowd"), "tenant", "00000000-0000-0000-0000-000000000000"))},
		{"expired", x.sign(t, with(with(with(base(), "aud", "flowd"), "tenant", f.org.ID), "exp", now.Add(-time.Minute).Unix()))},
		{"HS256 keyed with the issuer's public key", hsToken},
		{"another issuer", x.sign(t, with(with(with(base(), "aud", "flowd"), "tenant", f.org.ID), "iss", "https://other.test"))},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) { assertInvalid(t, f.m, tt.raw, tt.name) })
	}
}

// BenchmarkVerifyAccessToken measures what authentication adds to an API
// request once a token has been seen: the cached path every request after the
// first takes.
func BenchmarkVerifyAccessToken(b *testing.B) {
	f := newFixture(b, nil)
	other := f.another(b, nil)
	other.run(b)
	ctx := context.Background()
	for !other.feed.Listening() {
		time.Sleep(time.Millisecond)
	}
	tok := f.token(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := other.VerifyAccessToken(ctx, tok.AccessToken); err != nil {
			b.Fatal(err)
		}
	}
}
