package oauth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/modules/identity/identitytest"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/web/internal/webtest"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

// dpopClient is a client's DPoP key; its proofs are made with go-jose.
type dpopClient struct {
	key    *ecdsa.PrivateKey
	signer jose.Signer
}

func newDPoPClient(t *testing.T) dpopClient {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	return dpopClient{key: key, signer: s}
}

func (d dpopClient) jkt(t *testing.T) string {
	t.Helper()
	sum, err := (&jose.JSONWebKey{Key: &d.key.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}

// proof makes a proof for method and htu, naming token in ath when there is one.
func (d dpopClient) proof(t *testing.T, method, htu, token, nonce string) string {
	t.Helper()
	c := map[string]any{"jti": rand.Text(), "htm": method, "htu": htu, "iat": time.Now().Unix()}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		c["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	if nonce != "" {
		c["nonce"] = nonce
	}
	b, _ := json.Marshal(c)
	jws, err := d.signer.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := jws.CompactSerialize()
	return raw
}

// dpopTokenRequest posts a client_credentials or refresh request with a
// DPoP header (none when proof is empty), checked against the OpenAPI document.
func dpopTokenRequest(t *testing.T, ts webtest.OAuthServer, c orgs.ClientCredentials, form url.Values, proof string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", webtest.FormType)
	req.Header.Set("Authorization", webtest.Basic(c.ID, c.Secret))
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	return webtest.SendTokenRequest(t, openapitest.Client(t), req)
}

var clientCredentials = url.Values{"grant_type": {"client_credentials"}}

// dpopGet calls the authenticated test route with an Authorization header
// and optional DPoP proofs, and returns the response and its body.
func dpopGet(t *testing.T, base, authorization string, proofs ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/test-principal", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const dpopAlgs = `DPoP algs="ES256 PS256 RS256"`

// TestDPoPTokenEndpoint checks the token endpoint's DPoP answers: a proof
// gets token_type DPoP and a token bound by cnf.jkt, which introspection
// shows; a bad proof is invalid_dpop_proof; a client required to use DPoP
// is refused without one; a bound family refreshes only with its key.
func TestDPoPTokenEndpoint(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	d := newDPoPClient(t)
	htu := ts.URL + "/oauth/token"

	resp, m := dpopTokenRequest(t, ts, ts.Full, clientCredentials, d.proof(t, "POST", htu, "", ""))
	if resp.StatusCode != 200 || m["token_type"] != "DPoP" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v %v", resp.StatusCode, m, resp.Header)
	}
	at := m["access_token"].(string)
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(at, ".")[1])
	var claims struct {
		Cnf struct {
			JKT string `json:"jkt"`
		} `json:"cnf"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Cnf.JKT != d.jkt(t) {
		t.Fatalf("cnf.jkt %q, want %q (%v)", claims.Cnf.JKT, d.jkt(t), err)
	}
	form := url.Values{"token": {at}}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/oauth/introspect", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", webtest.FormType)
	req.Header.Set("Authorization", webtest.Basic(ts.Full.ID, ts.Full.Secret))
	iresp, err := openapitest.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	_ = json.NewDecoder(iresp.Body).Decode(&in)
	iresp.Body.Close()
	if cnf, _ := in["cnf"].(map[string]any); in["token_type"] != "DPoP" || cnf["jkt"] != d.jkt(t) {
		t.Fatalf("introspection %v", in)
	}

	tests := []struct {
		name  string
		form  url.Values
		proof string
		code  string
	}{
		{"a proof for another URL", clientCredentials, d.proof(t, "POST", ts.URL+"/oauth/revoke", "", ""), "invalid_dpop_proof"},
		{"a proof for GET", clientCredentials, d.proof(t, "GET", htu, "", ""), "invalid_dpop_proof"},
		{"not a proof", clientCredentials, "nonsense", "invalid_dpop_proof"},
		{"the bound refresh token without a proof", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {m["refresh_token"].(string)}}, "", "invalid_grant"},
		{"the bound refresh token with another key", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {m["refresh_token"].(string)}},
			newDPoPClient(t).proof(t, "POST", htu, "", ""), "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, m := dpopTokenRequest(t, ts, ts.Full, tt.form, tt.proof)
			if resp.StatusCode != 400 || m["error"] != tt.code {
				t.Fatalf("%d %v, want 400 %s", resp.StatusCode, m, tt.code)
			}
		})
	}
	resp, m = dpopTokenRequest(t, ts, ts.Full, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {m["refresh_token"].(string)}},
		d.proof(t, "POST", htu, "", ""))
	if resp.StatusCode != 200 || m["token_type"] != "DPoP" {
		t.Fatalf("refresh with the key: %d %v", resp.StatusCode, m)
	}

	// A client required to use DPoP.
	if _, err := ts.Identity.SetClientDPoP(context.Background(), ts.Org.ID, ts.Reader.ID, true); err != nil {
		t.Fatal(err)
	}
	if resp, m := dpopTokenRequest(t, ts, ts.Reader, clientCredentials, ""); resp.StatusCode != 400 || m["error"] != "invalid_dpop_proof" {
		t.Fatalf("a DPoP client without a proof: %d %v", resp.StatusCode, m)
	}
	if resp, m := dpopTokenRequest(t, ts, ts.Reader, clientCredentials, d.proof(t, "POST", htu, "", "")); resp.StatusCode != 200 || m["token_type"] != "DPoP" {
		t.Fatalf("a DPoP client with a proof: %d %v", resp.StatusCode, m)
	}
}

// TestDPoPResourceRequests sends DPoP and bearer tokens to an API route
// through the echo server and checks the status and WWW-Authenticate of
// each: RFC 6750's challenge for the Bearer scheme, RFC 9449's for DPoP,
// both for a request without credentials.
func TestDPoPResourceRequests(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	d := newDPoPClient(t)
	get := func(c orgs.ClientCredentials, proof string) string {
		_, m := dpopTokenRequest(t, ts, c, clientCredentials, proof)
		return m["access_token"].(string)
	}
	bound := get(ts.Full, d.proof(t, "POST", ts.URL+"/oauth/token", "", ""))
	reader := get(ts.Reader, d.proof(t, "POST", ts.URL+"/oauth/token", "", ""))
	bearer := get(ts.Full, "")
	route := ts.URL + "/api/test-principal"
	replayed := d.proof(t, "GET", route, bound, "")
	if resp, body := dpopGet(t, ts.URL, "DPoP "+bound, replayed); resp.StatusCode != 200 {
		t.Fatalf("first use: %d %s", resp.StatusCode, body)
	}
	// Another instance, at another address: htu is still FLOWD_BASE_URL's.
	other := instance(t, ts, false)

	proofErr := func(desc string) string {
		return dpopAlgs + `, error="invalid_dpop_proof", error_description="` + desc + `"`
	}
	tests := []struct {
		name          string
		base          string
		authorization string
		proofs        []string
		status        int
		challenges    []string
	}{
		{"no credentials", ts.URL, "", nil, 401, []string{`Bearer realm="flowd"`, dpopAlgs}},
		{"the DPoP scheme without a token", ts.URL, "DPoP", nil, 401, []string{`Bearer realm="flowd"`, dpopAlgs}},
		{"a DPoP token with its proof", ts.URL, "DPoP " + bound, []string{d.proof(t, "GET", route, bound, "")}, 200, nil},
		{"the scheme in lower case", ts.URL, "dpop " + bound, []string{d.proof(t, "GET", route, bound, "")}, 200, nil},
		{"a DPoP token on another instance", other, "DPoP " + bound, []string{d.proof(t, "GET", route, bound, "")}, 200, nil},
		{"a proof naming the other instance's address", other, "DPoP " + bound, []string{d.proof(t, "GET", other+"/api/test-principal", bound, "")}, 401,
			[]string{proofErr("The DPoP proof's htu is not this request's URL without query and fragment.")}},
		{"a DPoP token as a bearer token", ts.URL, "Bearer " + bound, nil, 401, []string{`Bearer realm="flowd", error="invalid_token"`}},
		{"a bearer token with the DPoP scheme", ts.URL, "DPoP " + bearer, []string{d.proof(t, "GET", route, bearer, "")}, 401,
			[]string{dpopAlgs + `, error="invalid_token", error_description="The access token is not DPoP-bound: send it with the Bearer scheme."`}},
		{"a replayed proof", ts.URL, "DPoP " + bound, []string{replayed}, 401,
			[]string{proofErr("The DPoP proof was used before: make a new one for every request.")}},
		{"a proof for another URL", ts.URL, "DPoP " + bound, []string{d.proof(t, "GET", ts.URL+"/api/flows", bound, "")}, 401,
			[]string{proofErr("The DPoP proof's htu is not this request's URL without query and fragment.")}},
		{"a proof for another method", ts.URL, "DPoP " + bound, []string{d.proof(t, "POST", route, bound, "")}, 401,
			[]string{proofErr("The DPoP proof's htm is not this request's method.")}},
		{"a proof for another token", ts.URL, "DPoP " + bound, []string{d.proof(t, "GET", route, reader, "")}, 401,
			[]string{proofErr("The DPoP proof's ath is not the hash of the access token.")}},
		{"another key's proof", ts.URL, "DPoP " + bound, []string{newDPoPClient(t).proof(t, "GET", route, bound, "")}, 401,
			[]string{proofErr("The DPoP proof is signed by another key than the one the access token is bound to.")}},
		{"no proof", ts.URL, "DPoP " + bound, nil, 401, []string{proofErr("A DPoP proof is required with the DPoP scheme.")}},
		{"two proofs", ts.URL, "DPoP " + bound, []string{d.proof(t, "GET", route, bound, ""), d.proof(t, "GET", route, bound, "")}, 401,
			[]string{proofErr("Send exactly one DPoP header.")}},
		{"a DPoP token without the scope", ts.URL, "DPoP " + reader, []string{d.proof(t, "GET", route, reader, "")}, 403,
			[]string{dpopAlgs + `, error="insufficient_scope", scope="flows:write"`}},
		{"a bearer token still works", ts.URL, "Bearer " + bearer, nil, 200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := dpopGet(t, tt.base, tt.authorization, tt.proofs...)
			got := resp.Header.Values("WWW-Authenticate")
			if resp.StatusCode != tt.status || strings.Join(got, "\n") != strings.Join(tt.challenges, "\n") {
				t.Fatalf("%d %q, want %d %q: %s", resp.StatusCode, got, tt.status, tt.challenges, body)
			}
			if tt.status >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
			if resp.Header.Get("DPoP-Nonce") != "" {
				t.Fatalf("DPoP-Nonce %q while nonces are off", resp.Header.Get("DPoP-Nonce"))
			}
		})
	}
}

// TestDPoPNonceRoundTrip runs with nonces required and does what a client
// library does: a first request without a nonce learns it from DPoP-Nonce
// (400 use_dpop_nonce at the token endpoint, 401 with a DPoP challenge at
// a resource) and its retry with the nonce succeeds.
func TestDPoPNonceRoundTrip(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, func(c *identitytest.Config) { c.DPoPNonceRequired = true })
	d := newDPoPClient(t)
	htu := ts.URL + "/oauth/token"
	resp, m := dpopTokenRequest(t, ts, ts.Full, clientCredentials, d.proof(t, "POST", htu, "", ""))
	nonce := resp.Header.Get("DPoP-Nonce")
	if resp.StatusCode != 400 || m["error"] != "use_dpop_nonce" || nonce == "" {
		t.Fatalf("without a nonce: %d %v, DPoP-Nonce %q", resp.StatusCode, m, nonce)
	}
	resp, m = dpopTokenRequest(t, ts, ts.Full, clientCredentials, d.proof(t, "POST", htu, "", nonce))
	if resp.StatusCode != 200 || m["token_type"] != "DPoP" || resp.Header.Get("DPoP-Nonce") == "" {
		t.Fatalf("with the nonce: %d %v, DPoP-Nonce %q", resp.StatusCode, m, resp.Header.Get("DPoP-Nonce"))
	}
	at := m["access_token"].(string)
	route := ts.URL + "/api/test-principal"

	resp, body := dpopGet(t, ts.URL, "DPoP "+at, d.proof(t, "GET", route, at, ""))
	want := dpopAlgs + `, error="use_dpop_nonce", error_description="The DPoP proof must carry the nonce of the DPoP-Nonce header."`
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want || resp.Header.Get("DPoP-Nonce") == "" {
		t.Fatalf("resource without a nonce: %d %q %q: %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), resp.Header.Get("DPoP-Nonce"), body)
	}
	// Another instance accepts this one's nonce.
	resp, body = dpopGet(t, instance(t, ts, false), "DPoP "+at, d.proof(t, "GET", route, at, nonce))
	if resp.StatusCode != 200 || resp.Header.Get("DPoP-Nonce") == "" {
		t.Fatalf("resource with the nonce: %d %s", resp.StatusCode, body)
	}
	// A bearer request is not told a nonce.
	if resp, _ := dpopGet(t, ts.URL, ""); resp.Header.Get("DPoP-Nonce") != "" {
		t.Fatal("DPoP-Nonce sent to a request without DPoP")
	}
}

// TestDiscoveryListsDPoPAlgorithms checks RFC 9449 5.1's metadata.
func TestDiscoveryListsDPoPAlgorithms(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	resp, err := openapitest.Client(t).Get(ts.URL + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&doc)
	algs, _ := json.Marshal(doc["dpop_signing_alg_values_supported"])
	if string(algs) != `["ES256","PS256","RS256"]` {
		t.Fatalf("dpop_signing_alg_values_supported %s", algs)
	}
}
