package tokens

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens/internal/dpopproof"
)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// dpopKey is a client's DPoP key: proofs are made by hand, as a client
// library such as oauth4webapi makes them (a jwk of kty, crv, x and y).
type dpopKey struct{ priv *ecdsa.PrivateKey }

func newDPoPKey(t testing.TB) dpopKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return dpopKey{priv}
}

// jwk is the public key as a proof's header carries it.
func (k dpopKey) jwk() map[string]any {
	var x, y [32]byte
	k.priv.X.FillBytes(x[:])
	k.priv.Y.FillBytes(y[:])
	return map[string]any{"kty": "EC", "crv": "P-256", "x": b64(x[:]), "y": b64(y[:])}
}

func (k dpopKey) jkt(t testing.TB) string {
	t.Helper()
	sum, err := (&jose.JSONWebKey{Key: &k.priv.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return b64(sum)
}

func (k dpopKey) header() map[string]any {
	return map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": k.jwk()}
}

// sign makes a compact JWS of header and claims signed with ES256 by k.
func (k dpopKey) sign(t testing.TB, header, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64(sig)
}

// proofClaims are the claims of a good proof for method and path, naming
// the access token in ath when there is one.
func proofClaims(now time.Time, method, path, token string) map[string]any {
	c := map[string]any{"jti": newUUID(), "htm": method, "htu": testIssuer + path, "iat": now.Unix()}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		c["ath"] = b64(sum[:])
	}
	return c
}

// proof makes a good proof of k for method and path.
func (k dpopKey) proof(t testing.TB, f fixture, method, path, token string) string {
	return k.sign(t, k.header(), proofClaims(f.clock.now(), method, path, token))
}

func tokenDPoPRequest(proofs ...string) DPoPRequest {
	return NewDPoPRequest(proofs, "POST", "/oauth/token")
}

// dpopToken gets a DPoP-bound token for the fixture's client and key.
func (f fixture) dpopToken(t testing.TB, k dpopKey) Token {
	t.Helper()
	tok, err := f.m.Token(context.Background(), TokenRequest{GrantType: GrantClientCredentials, ClientAuth: f.auth(),
		DPoP: tokenDPoPRequest(k.proof(t, f, "POST", "/oauth/token", ""))})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// dpopCode returns the DPoP error code err carries, "" when none.
func dpopCode(err error) string {
	var de *DPoPError
	if errors.As(err, &de) {
		return de.Code
	}
	var te *TokenError
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

func tokenClaims(t testing.TB, raw string) map[string]any {
	t.Helper()
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDPoPTokenIsBound checks that a token request with a proof gets a DPoP
// token whose cnf.jkt is the proof key's thumbprint, that introspection
// says so, and that a request without one still gets a bearer token.
func TestDPoPTokenIsBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	k := newDPoPKey(t)
	tok := f.dpopToken(t, k)
	if tok.TokenType != "DPoP" {
		t.Fatalf("token_type %q, want DPoP", tok.TokenType)
	}
	cnf, _ := tokenClaims(t, tok.AccessToken)["cnf"].(map[string]any)
	if cnf["jkt"] != k.jkt(t) {
		t.Fatalf("cnf %v, want jkt %s", cnf, k.jkt(t))
	}
	in, err := f.m.Introspect(context.Background(), ClientTokenRequest{ClientAuth: f.auth(), Token: tok.AccessToken})
	if err != nil || !in.Active || in.TokenType != "DPoP" || in.DPoPJKT != k.jkt(t) {
		t.Fatalf("introspection %+v, %v", in, err)
	}
	bearer := f.token(t)
	if bearer.TokenType != "Bearer" || tokenClaims(t, bearer.AccessToken)["cnf"] != nil {
		t.Fatalf("a request without a proof got %q %v", bearer.TokenType, tokenClaims(t, bearer.AccessToken)["cnf"])
	}
	if _, err := f.m.VerifyAccessToken(context.Background(), bearer.AccessToken); err != nil {
		t.Fatalf("bearer token refused: %v", err)
	}
}

// TestDPoPProofChecks sends a DPoP-bound token with every kind of bad proof:
// each is refused with invalid_dpop_proof (or is accepted, for what RFC 9449
// 4.3 tells servers to ignore or normalize), and a refused proof is not
// spent, so the good one still works after.
func TestDPoPProofChecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	k := newDPoPKey(t)
	tok := f.dpopToken(t, k).AccessToken
	f.clock.stop()
	now := f.clock.now()
	good := func() map[string]any { return proofClaims(now, "GET", "/api/flows", tok) }
	set := func(c map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(c, kv[i].(string))
			} else {
				c[kv[i].(string)] = kv[i+1]
			}
		}
		return c
	}
	hdr := func(kv ...any) map[string]any { return set(k.header(), kv...) }
	other := newDPoPKey(t)
	rsaSmall, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rsaGood, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	withRSA := func(key *rsa.PrivateKey, alg jose.SignatureAlgorithm) string { return rsaProof(t, key, alg, good()) }
	unsigned := func(alg string, sig []byte) string {
		h, _ := json.Marshal(hdr("alg", alg))
		c, _ := json.Marshal(good())
		input := b64(h) + "." + b64(c)
		if sig == nil {
			return input + "."
		}
		mac := hmac.New(sha256.New, sig)
		mac.Write([]byte(input))
		return input + "." + b64(mac.Sum(nil))
	}
	private := k.jwk()
	d, err := k.priv.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	private["d"] = b64(d)

	tests := []struct {
		name   string
		proofs []string
		want   string // "" accepted, else the DPoP error code
	}{
		{"two headers", []string{k.sign(t, k.header(), good()), k.sign(t, k.header(), good())}, ErrCodeInvalidDPoPProof},
		{"an empty header", []string{""}, ErrCodeInvalidDPoPProof},
		{"not a JWS", []string{"nonsense"}, ErrCodeInvalidDPoPProof},
		{"typ JWT", []string{k.sign(t, hdr("typ", "JWT"), good())}, ErrCodeInvalidDPoPProof},
		{"no typ", []string{k.sign(t, hdr("typ", nil), good())}, ErrCodeInvalidDPoPProof},
		{"alg none", []string{unsigned("none", nil)}, ErrCodeInvalidDPoPProof},
		{"HS256 with the jwk as secret", []string{unsigned("HS256", []byte(k.jwk()["x"].(string)))}, ErrCodeInvalidDPoPProof},
		{"a private jwk", []string{k.sign(t, hdr("jwk", private), good())}, ErrCodeInvalidDPoPProof},
		{"no jwk", []string{k.sign(t, hdr("jwk", nil), good())}, ErrCodeInvalidDPoPProof},
		{"the jwk of another key", []string{k.sign(t, hdr("jwk", other.jwk()), good())}, ErrCodeInvalidDPoPProof},
		{"a 1024-bit RSA key", []string{withRSA(rsaSmall, jose.RS256)}, ErrCodeInvalidDPoPProof},
		{"another key than the token's (RS256)", []string{withRSA(rsaGood, jose.RS256)}, ErrCodeInvalidDPoPProof},
		{"another key than the token's (PS256)", []string{withRSA(rsaGood, jose.PS256)}, ErrCodeInvalidDPoPProof},
		{"another key than the token's (ES256)", []string{other.sign(t, other.header(), good())}, ErrCodeInvalidDPoPProof},
		{"no jti", []string{k.sign(t, k.header(), set(good(), "jti", nil))}, ErrCodeInvalidDPoPProof},
		{"a jti too long", []string{k.sign(t, k.header(), set(good(), "jti", strings.Repeat("j", 257)))}, ErrCodeInvalidDPoPProof},
		{"another method", []string{k.sign(t, k.header(), set(good(), "htm", "POST"))}, ErrCodeInvalidDPoPProof},
		{"a lower-case method", []string{k.sign(t, k.header(), set(good(), "htm", "get"))}, ErrCodeInvalidDPoPProof},
		{"another path", []string{k.sign(t, k.header(), set(good(), "htu", testIssuer+"/api/definitions"))}, ErrCodeInvalidDPoPProof},
		{"another host", []string{k.sign(t, k.header(), set(good(), "htu", "https://evil.test/api/flows"))}, ErrCodeInvalidDPoPProof},
		{"http for https", []string{k.sign(t, k.header(), set(good(), "htu", "http://flowd.test/api/flows"))}, ErrCodeInvalidDPoPProof},
		{"a relative htu", []string{k.sign(t, k.header(), set(good(), "htu", "/api/flows"))}, ErrCodeInvalidDPoPProof},
		{"no iat", []string{k.sign(t, k.header(), set(good(), "iat", nil))}, ErrCodeInvalidDPoPProof},
		{"iat as a string", []string{k.sign(t, k.header(), set(good(), "iat", "1700000000"))}, ErrCodeInvalidDPoPProof},
		{"a stale iat", []string{k.sign(t, k.header(), set(good(), "iat", now.Add(-DPoPProofMaxAge-2*time.Second).Unix()))}, ErrCodeInvalidDPoPProof},
		{"an iat in the future", []string{k.sign(t, k.header(), set(good(), "iat", now.Add(DPoPProofMaxFuture+3*time.Second).Unix()))}, ErrCodeInvalidDPoPProof},
		{"no ath", []string{k.sign(t, k.header(), set(good(), "ath", nil))}, ErrCodeInvalidDPoPProof},
		{"the ath of another token", []string{k.sign(t, k.header(), set(good(), "ath", b64(make([]byte, 32))))}, ErrCodeInvalidDPoPProof},
		{"htu with a query, upper case and the default port", []string{k.sign(t, k.header(),
			set(good(), "htu", "HTTPS://FLOWD.test:443/api/flows?limit=5#x"))}, ""},
		{"a proof 50 seconds old", []string{k.sign(t, k.header(), set(good(), "iat", now.Add(-50*time.Second).Unix()))}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := NewDPoPRequest(tt.proofs, "GET", "/api/flows")
			_, err := f.m.VerifyDPoPAccessToken(context.Background(), tok, in)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if apperr.CodeOf(err) != apperr.Unauthenticated || dpopCode(err) != tt.want {
				t.Fatalf("%v, want an unauthenticated %s", err, tt.want)
			}
		})
	}
}

// rsaProof makes a proof signed by an RSA key with alg, its jwk embedded by go-jose.
func rsaProof(t testing.TB, key *rsa.PrivateKey, alg jose.SignatureAlgorithm, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := jws.CompactSerialize()
	return raw
}

// TestDPoPRSAKeys binds tokens to RSA keys signing with PS256 and RS256.
func TestDPoPRSAKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, alg := range []jose.SignatureAlgorithm{jose.PS256, jose.RS256} {
		proof := rsaProof(t, key, alg, proofClaims(f.clock.now(), "POST", "/oauth/token", ""))
		tok, err := f.m.Token(ctx, TokenRequest{GrantType: GrantClientCredentials, ClientAuth: f.auth(), DPoP: tokenDPoPRequest(proof)})
		if err != nil || tok.TokenType != "DPoP" {
			t.Fatalf("%s: %+v, %v", alg, tok, err)
		}
		in := NewDPoPRequest([]string{rsaProof(t, key, alg, proofClaims(f.clock.now(), "DELETE", "/api/flows/x", tok.AccessToken))},
			"DELETE", "/api/flows/x")
		if _, err := f.m.VerifyDPoPAccessToken(ctx, tok.AccessToken, in); err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
	}
}

// TestDPoPSchemeAndBinding checks the binding itself: a DPoP-bound token is
// no bearer token (RFC 9449 7.2), a bearer token is no DPoP token, and the
// DPoP scheme needs a proof.
func TestDPoPSchemeAndBinding(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	k := newDPoPKey(t)
	bound, bearer := f.dpopToken(t, k).AccessToken, f.token(t).AccessToken
	ctx := context.Background()
	if _, err := f.m.VerifyAccessToken(ctx, bound); apperr.CodeOf(err) != apperr.Unauthenticated {
		t.Fatalf("a DPoP-bound token as a bearer token: %v", err)
	}
	in := NewDPoPRequest([]string{k.proof(t, f, "GET", "/api/flows", bearer)}, "GET", "/api/flows")
	if _, err := f.m.VerifyDPoPAccessToken(ctx, bearer, in); apperr.CodeOf(err) != apperr.Unauthenticated || dpopCode(err) != "" {
		t.Fatalf("a bearer token with the DPoP scheme: %v, want invalid_token", err)
	}
	if _, err := f.m.VerifyDPoPAccessToken(ctx, bound, NewDPoPRequest(nil, "GET", "/api/flows")); dpopCode(err) != ErrCodeInvalidDPoPProof {
		t.Fatalf("no proof: %v", err)
	}
	// The cached verification still binds: the same token again, and its
	// cache entry, need the same key.
	for range 2 {
		in := NewDPoPRequest([]string{newDPoPKey(t).proof(t, f, "GET", "/api/flows", bound)}, "GET", "/api/flows")
		if _, err := f.m.VerifyDPoPAccessToken(ctx, bound, in); dpopCode(err) != ErrCodeInvalidDPoPProof {
			t.Fatalf("another key: %v", err)
		}
		in = NewDPoPRequest([]string{k.proof(t, f, "GET", "/api/flows", bound)}, "GET", "/api/flows")
		p, err := f.m.VerifyDPoPAccessToken(ctx, bound, in)
		if err != nil || p.ClientID != f.client.ID || p.OrganizationID != f.org.ID {
			t.Fatalf("%+v, %v", p, err)
		}
	}
}

// TestDPoPReplay spends a proof on one instance: it is refused after on
// the same instance and on another sharing the database, and a proof of the
// same jti by another key is a different proof.
func TestDPoPReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	k := newDPoPKey(t)
	tok := f.dpopToken(t, k).AccessToken
	other := f.another(t, nil)
	ctx := context.Background()
	claims := proofClaims(f.clock.now(), "GET", "/api/flows", tok)
	in := NewDPoPRequest([]string{k.sign(t, k.header(), claims)}, "GET", "/api/flows")
	if _, err := f.m.VerifyDPoPAccessToken(ctx, tok, in); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*instance{"same instance": f.m, "other instance": other} {
		if _, err := m.VerifyDPoPAccessToken(ctx, tok, in); dpopCode(err) != ErrCodeInvalidDPoPProof {
			t.Fatalf("%s: replay %v", name, err)
		}
	}
	// The same proof at the token endpoint: spent there too.
	proof := k.proof(t, f, "POST", "/oauth/token", "")
	if _, err := other.Token(ctx, TokenRequest{GrantType: GrantClientCredentials, ClientAuth: f.auth(), DPoP: tokenDPoPRequest(proof)}); err != nil {
		t.Fatal(err)
	}
	_, err := f.m.Token(ctx, TokenRequest{GrantType: GrantClientCredentials, ClientAuth: f.auth(), DPoP: tokenDPoPRequest(proof)})
	if dpopCode(err) != ErrCodeInvalidDPoPProof {
		t.Fatalf("token endpoint replay: %v", err)
	}
	// Each accepted proof was recorded once.
	var n int
	if err := f.m.pool.QueryRow(ctx, "select count(*) from dpop_proofs where jkt = $1", k.jkt(t)).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d proofs of the key recorded (%v), want 3", n, err)
	}
}

// TestDPoPNonce runs with FLOWD_DPOP_NONCE=required: a proof without the
// nonce, or with a stale one, is answered use_dpop_nonce at the token
// endpoint and at resources; the current and the previous step's nonce, and
// another instance's, are accepted.
func TestDPoPNonce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *testConfig) { c.DPoPNonceRequired = true })
	other := f.another(t, nil)
	ctx := context.Background()
	k := newDPoPKey(t)
	tokenWith := func(m *instance, nonce any) error {
		c := proofClaims(f.clock.now(), "POST", "/oauth/token", "")
		if nonce != nil {
			c["nonce"] = nonce
		}
		_, err := m.Token(ctx, TokenRequest{GrantType: GrantClientCredentials, ClientAuth: f.auth(), DPoP: tokenDPoPRequest(k.sign(t, k.header(), c))})
		return err
	}
	step := f.clock.now().Unix() / int64(dpopproof.NonceStep/time.Second)
	tests := []struct {
		name  string
		m     *instance
		nonce any
		want  string
	}{
		{"no nonce", f.m, nil, ErrCodeUseDPoPNonce},
		{"an empty nonce", f.m, "", ErrCodeUseDPoPNonce},
		{"a made-up nonce", f.m, "abc", ErrCodeUseDPoPNonce},
		{"a nonce two steps old", f.m, f.m.dpop.NonceAt(step - 2), ErrCodeUseDPoPNonce},
		{"a nonce as a number", f.m, 12, ErrCodeInvalidDPoPProof},
		{"the current nonce", f.m, f.m.DPoPNonce(), ""},
		{"the previous step's nonce", f.m, f.m.dpop.NonceAt(step - 1), ""},
		{"another instance's nonce", f.m, other.DPoPNonce(), ""},
		{"this instance's nonce elsewhere", other, f.m.DPoPNonce(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tokenWith(tt.m, tt.nonce)
			if tt.want == "" && err != nil || dpopCode(err) != tt.want {
				t.Fatalf("%v, want %q", err, tt.want)
			}
		})
	}
	// A resource request: the same rule.
	tok, err := f.m.Token(ctx, TokenRequest{GrantType: GrantClientCredentials, ClientAuth: f.auth(),
		DPoP: tokenDPoPRequest(k.sign(t, k.header(), with(proofClaims(f.clock.now(), "POST", "/oauth/token", ""), "nonce", f.m.DPoPNonce())))})
	if err != nil {
		t.Fatal(err)
	}
	in := NewDPoPRequest([]string{k.proof(t, f, "GET", "/api/flows", tok.AccessToken)}, "GET", "/api/flows")
	if _, err := f.m.VerifyDPoPAccessToken(ctx, tok.AccessToken, in); apperr.CodeOf(err) != apperr.Unauthenticated || dpopCode(err) != ErrCodeUseDPoPNonce {
		t.Fatalf("resource without a nonce: %v", err)
	}
	in = NewDPoPRequest([]string{k.sign(t, k.header(), with(proofClaims(f.clock.now(), "GET", "/api/flows", tok.AccessToken), "nonce", f.m.DPoPNonce()))}, "GET", "/api/flows")
	if _, err := f.m.VerifyDPoPAccessToken(ctx, tok.AccessToken, in); err != nil {
		t.Fatalf("resource with the nonce: %v", err)
	}
	// Ten minutes on, the nonce is stale.
	old := f.m.DPoPNonce()
	f.clock.advance(2 * dpopproof.NonceStep)
	if f.m.DPoPNonce() == old || tokenWith(f.m, old) == nil {
		t.Fatal("a nonce ten minutes old accepted")
	}
	if n := (&Service{}).DPoPNonce(); n != "" {
		t.Fatalf("nonce %q while off", n)
	}
}

// TestDPoPRequiredClient turns DPoP on for a client: its token requests
// without a proof are refused, with one they work; turned off, bearer
// tokens are issued again. The change is refused for another
// organization's client.
func TestDPoPRequiredClient(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	var seen orgs.ClientChange
	hook := func(_ context.Context, _ database.Tx, ch orgs.ClientChange) error { seen = ch; return nil }
	c, err := f.m.SetClientDPoP(ctx, f.org.ID, f.client.ID, true, hook)
	if err != nil || !c.DPoPBound || seen.Before.DPoPBound || !seen.After.DPoPBound {
		t.Fatalf("%+v %+v, %v", c, seen, err)
	}
	_, err = f.m.Token(ctx, TokenRequest{GrantType: GrantClientCredentials, ClientAuth: f.auth()})
	if dpopCode(err) != ErrCodeInvalidDPoPProof {
		t.Fatalf("no proof: %v", err)
	}
	if tok := f.dpopToken(t, newDPoPKey(t)); tok.TokenType != "DPoP" {
		t.Fatalf("token_type %q", tok.TokenType)
	}
	if got, _ := f.m.Client(ctx, f.client.ID); !got.DPoPBound {
		t.Fatal("Client does not say DPoPBound")
	}
	if _, err := f.m.SetClientDPoP(ctx, f.client.ID, f.client.ID, false); !errors.Is(err, orgs.ErrClientNotFound) {
		t.Fatalf("bad organization id: %v", err)
	}
	otherOrg, _ := f.m.CreateOrganization(ctx, orgs.NewOrganization{Name: "Other Bank"})
	if _, err := f.m.SetClientDPoP(ctx, otherOrg.ID, f.client.ID, false); !errors.Is(err, orgs.ErrClientNotFound) {
		t.Fatalf("another organization's client: %v", err)
	}
	if _, err := f.m.SetClientDPoP(ctx, f.org.ID, f.client.ID, false); err != nil {
		t.Fatal(err)
	}
	if tok := f.token(t); tok.TokenType != "Bearer" {
		t.Fatalf("after turning DPoP off: %q", tok.TokenType)
	}
	created, err := f.m.CreateClient(ctx, orgs.NewClient{OrganizationID: f.org.ID, DPoPBound: true})
	if err != nil || !created.DPoPBound {
		t.Fatalf("created %+v, %v", created.Client, err)
	}
}

// TestDPoPRefreshKeepsTheKey refreshes a family first issued with DPoP: with
// a proof of the same key it works and stays bound; without a proof, or
// with another key, it is refused and the refresh token stays usable.
func TestDPoPRefreshKeepsTheKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	k := newDPoPKey(t)
	first := f.dpopToken(t, k)
	refresh := func(proof ...string) (Token, error) {
		return f.m.Token(ctx, TokenRequest{GrantType: GrantRefreshToken, ClientAuth: f.auth(), RefreshToken: first.RefreshToken,
			DPoP: tokenDPoPRequest(proof...)})
	}
	if _, err := refresh(); dpopCode(err) != ErrCodeInvalidGrant {
		t.Fatalf("without a proof: %v", err)
	}
	if _, err := refresh(newDPoPKey(t).proof(t, f, "POST", "/oauth/token", "")); dpopCode(err) != ErrCodeInvalidGrant {
		t.Fatalf("another key: %v", err)
	}
	next, err := refresh(k.proof(t, f, "POST", "/oauth/token", ""))
	if err != nil || next.TokenType != "DPoP" {
		t.Fatalf("the same key: %+v, %v", next, err)
	}
	// The successor is bound too.
	_, err = f.m.Token(ctx, TokenRequest{GrantType: GrantRefreshToken, ClientAuth: f.auth(), RefreshToken: next.RefreshToken})
	if dpopCode(err) != ErrCodeInvalidGrant {
		t.Fatalf("the successor without a proof: %v", err)
	}
	// A bearer family may be refreshed into a DPoP token.
	bearer := f.token(t)
	tok, err := f.m.Token(ctx, TokenRequest{GrantType: GrantRefreshToken, ClientAuth: f.auth(), RefreshToken: bearer.RefreshToken,
		DPoP: tokenDPoPRequest(k.proof(t, f, "POST", "/oauth/token", ""))})
	if err != nil || tok.TokenType != "DPoP" {
		t.Fatalf("a bearer family with a proof: %+v, %v", tok, err)
	}
}

// TestSweepForgetsExpiredDPoPProofs deletes the jtis of proofs past the window.
func TestSweepForgetsExpiredDPoPProofs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	k := newDPoPKey(t)
	f.dpopToken(t, k)
	f.dpopToken(t, k)
	ctx := context.Background()
	if _, err := f.m.pool.Exec(ctx, "update dpop_proofs set expires_at = now() - interval '2 minutes' where jti = (select min(jti) from dpop_proofs)"); err != nil {
		t.Fatal(err)
	}
	f.m.sweepOnce(ctx)
	var n int
	if err := f.m.pool.QueryRow(ctx, "select count(*) from dpop_proofs").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d proofs left (%v), want 1", n, err)
	}
}
