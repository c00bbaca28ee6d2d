package oauth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/flowd/flowd/internal/testkit/formbrowser"
	"github.com/flowd/flowd/modules/identity/login"
	"github.com/flowd/flowd/modules/identity/staff"
	"github.com/flowd/flowd/web/internal/webtest"
)

// The tests of the code flow: authorization, code exchange, ID tokens,
// userinfo and end-session.

// pkcePair returns a verifier and its S256 challenge.
func pkcePair() (string, string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(v))
	return v, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeCode signs ada in, in a fresh browser, as the console client
// would, but stops at the redirect to the callback and returns the code.
func authorizeCode(t *testing.T, ls webtest.LoginServer, challenge string) string {
	t.Helper()
	return authorizeCodeFor(t, ls, login.ConsoleClientID, ls.URL+"/console/auth/callback", challenge)
}

// authorizeCodeFor is authorizeCode for the staff client clientID with its
// registered redirect URI.
func authorizeCodeFor(t *testing.T, ls webtest.LoginServer, clientID, redirectURI, challenge string) string {
	t.Helper()
	b := formbrowser.New(t)
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI},
		"scope": {"openid profile"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	form := b.Follow(http.MethodGet, ls.URL+"/oauth/authorize?"+q.Encode(), nil)
	v := form.HiddenFields(t)
	v.Set("username", "ada")
	v.Set("password", webtest.TestPassword)
	p := b.Post(ls.URL+"/idp/login", v)
	cq := webtest.MustQuery(t, p.Location)
	if cq.Get("state") != "st" || cq.Get("iss") != ls.URL || cq.Get("code") == "" {
		t.Fatalf("redirect with the code: %s", p.Location)
	}
	return cq.Get("code")
}

type tokenAnswer struct {
	status int
	body   map[string]any
	header http.Header
}

func exchange(t *testing.T, ls webtest.LoginServer, form url.Values, basic bool) tokenAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ls.URL+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(login.ConsoleClientID, login.BuiltInClientSecret(ls.Cfg.SessionKey, login.ConsoleClientID))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return tokenAnswer{resp.StatusCode, body, resp.Header}
}

func userinfo(t *testing.T, ls webtest.LoginServer, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ls.URL+"/oauth/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestCodeExchange(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	redirect := ls.URL + "/console/auth/callback"

	t.Run("works once, and a replay revokes what it issued", func(t *testing.T) {
		verifier, challenge := pkcePair()
		code := authorizeCode(t, ls, challenge)
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
		first := exchange(t, ls, form, true)
		if first.status != 200 || first.body["id_token"] == nil || first.body["token_type"] != "Bearer" || first.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("exchange: %d %v", first.status, first.body)
		}
		idt, _ := first.body["id_token"].(string)
		parts := strings.Split(idt, ".")
		if len(parts) != 3 {
			t.Fatalf("id_token %q", idt)
		}
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var claims map[string]any
		if err := json.Unmarshal(payload, &claims); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]any{"iss": ls.URL, "aud": login.ConsoleClientID, "nonce": "nn", "org_id": "org-a",
			"preferred_username": "ada", "name": "Person ada"} {
			if claims[k] != want {
				t.Errorf("id_token %s = %v, want %v", k, claims[k], want)
			}
		}
		exp, _ := claims["exp"].(float64)
		iat, _ := claims["iat"].(float64)
		authTime, _ := claims["auth_time"].(float64)
		roles, _ := claims["roles"].([]any)
		if exp-iat != 300 || authTime == 0 || authTime > iat || len(roles) != 1 || roles[0] != "admin" || claims["sub"] == "" {
			t.Errorf("id_token times or roles: %v", claims)
		}
		access, _ := first.body["access_token"].(string)
		status, claims := userinfo(t, ls, access)
		if status != 200 || claims["org_id"] != "org-a" || claims["preferred_username"] != "ada" {
			t.Fatalf("userinfo: %d %v", status, claims)
		}
		second := exchange(t, ls, form, true)
		if second.status != 400 || second.body["error"] != "invalid_grant" {
			t.Fatalf("a reused code: %d %v", second.status, second.body)
		}
		if status, _ := userinfo(t, ls, access); status != http.StatusUnauthorized {
			t.Fatalf("the token of a replayed code still works: %d", status)
		}
	})

	tests := []struct {
		name   string
		mutate func(form url.Values, verifier string)
		basic  bool
		status int
		error  string
	}{
		{"missing verifier", func(f url.Values, _ string) { f.Del("code_verifier") }, true, 400, "invalid_request"},
		{"wrong verifier", func(f url.Values, _ string) {
			v, _ := pkcePair()
			f.Set("code_verifier", v)
		}, true, 400, "invalid_grant"},
		{"other redirect_uri", func(f url.Values, _ string) { f.Set("redirect_uri", ls.URL+"/elsewhere") }, true, 400, "invalid_grant"},
		{"no client authentication", func(f url.Values, _ string) {}, false, 401, "invalid_client"},
		{"wrong client secret in the body", func(f url.Values, _ string) {
			f.Set("client_id", login.ConsoleClientID)
			f.Set("client_secret", "guess")
		}, false, 401, "invalid_client"},
		{"unknown code", func(f url.Values, _ string) { f.Set("code", "made-up") }, true, 400, "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verifier, challenge := pkcePair()
			code := authorizeCode(t, ls, challenge)
			form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
			tt.mutate(form, verifier)
			got := exchange(t, ls, form, tt.basic)
			if got.status != tt.status || got.body["error"] != tt.error {
				t.Fatalf("got %d %v, want %d %s", got.status, got.body, tt.status, tt.error)
			}
		})
	}

	t.Run("a wrong verifier uses the code up", func(t *testing.T) {
		verifier, challenge := pkcePair()
		code := authorizeCode(t, ls, challenge)
		other, _ := pkcePair()
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {other}}
		exchange(t, ls, form, true)
		form.Set("code_verifier", verifier)
		if got := exchange(t, ls, form, true); got.status != 400 || got.body["error"] != "invalid_grant" {
			t.Fatalf("the right verifier after a wrong one: %d %v", got.status, got.body)
		}
	})
}

// TestIDTokenSigningAlgorithms has go-oidc discover the built-in provider
// and verify its ID tokens against the JWKS with one algorithm only, as
// Spring Security's default decoder does with RS256: RS256 is the default,
// and a client registered for ES256 gets ES256.
func TestIDTokenSigningAlgorithms(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{ExtraClients: func(base string) []login.Client {
		return []login.Client{{ID: "es-client", Name: "an ES256 relying party", Secret: "es secret", Method: login.MethodStaff,
			RedirectURIs: []string{base + "/es/callback"}, IDTokenSignedResponseAlg: jose.ES256}}
	}})
	ls.CreateStaff(t, "org-a", "ada", staff.RoleAdmin)
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, ls.URL)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, clientID, secret, redirect string
		alg, otherAlg                    string
	}{
		{"the console, by default", login.ConsoleClientID, login.BuiltInClientSecret(ls.Cfg.SessionKey, login.ConsoleClientID),
			ls.URL + "/console/auth/callback", oidc.RS256, oidc.ES256},
		{"a client registered for ES256", "es-client", "es secret", ls.URL + "/es/callback", oidc.ES256, oidc.RS256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verifier, challenge := pkcePair()
			code := authorizeCodeFor(t, ls, tt.clientID, tt.redirect, challenge)
			oc := oauth2.Config{ClientID: tt.clientID, ClientSecret: tt.secret, Endpoint: provider.Endpoint(), RedirectURL: tt.redirect}
			tok, err := oc.Exchange(ctx, code, oauth2.VerifierOption(verifier))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := tok.Extra("id_token").(string)
			idt, err := provider.Verifier(&oidc.Config{ClientID: tt.clientID, SupportedSigningAlgs: []string{tt.alg}}).Verify(ctx, raw)
			if err != nil || idt.Nonce != "nn" {
				t.Fatalf("go-oidc with %s only: %v", tt.alg, err)
			}
			if _, err := provider.Verifier(&oidc.Config{ClientID: tt.clientID, SupportedSigningAlgs: []string{tt.otherAlg}}).Verify(ctx, raw); err == nil {
				t.Fatalf("go-oidc with %s only accepted the ID token too", tt.otherAlg)
			}
			jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
			if err != nil {
				t.Fatal(err)
			}
			kid := jws.Signatures[0].Header.KeyID
			set := fetchJWKS(t, ls.URL)
			keys := set.Key(kid)
			if len(keys) != 1 || keys[0].Algorithm != tt.alg || keys[0].Use != "sig" || !keys[0].IsPublic() {
				t.Fatalf("JWKS entry of the ID token's key %q: %+v", kid, keys)
			}
			if pub, ok := keys[0].Key.(*rsa.PublicKey); tt.alg == oidc.RS256 && (!ok || pub.N.BitLen() < 2048) {
				t.Fatalf("RS256 key %T, at least 2048 bits wanted", keys[0].Key)
			}
		})
	}

	t.Run("an ID token of the previous key verifies after a rotation", func(t *testing.T) {
		idToken := func() string {
			verifier, challenge := pkcePair()
			code := authorizeCode(t, ls, challenge)
			got := exchange(t, ls, url.Values{"grant_type": {"authorization_code"}, "code": {code},
				"redirect_uri": {ls.URL + "/console/auth/callback"}, "code_verifier": {verifier}}, true)
			raw, _ := got.body["id_token"].(string)
			return raw
		}
		before := idToken()
		if _, err := ls.Ident.RotateSigningKeys(ctx); err != nil {
			t.Fatal(err)
		}
		after := idToken()
		// A relying party that meets the new key id fetches the JWKS again.
		fresh, err := oidc.NewProvider(ctx, ls.URL)
		if err != nil {
			t.Fatal(err)
		}
		v := fresh.Verifier(&oidc.Config{ClientID: login.ConsoleClientID, SupportedSigningAlgs: []string{oidc.RS256}})
		for _, raw := range []string{after, before} {
			if _, err := v.Verify(ctx, raw); err != nil {
				t.Fatalf("RS256 ID token after the rotation: %v", err)
			}
		}
		if kidOf(before) == kidOf(after) {
			t.Fatalf("the rotation did not change the ID token key: %s", kidOf(after))
		}
	})
}

// kidOf returns the kid in the header of a compact JWS.
func kidOf(raw string) string {
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil || len(jws.Signatures) != 1 {
		return ""
	}
	return jws.Signatures[0].Header.KeyID
}

// fetchJWKS reads the key set at /oauth/jwks.
func fetchJWKS(t *testing.T, base string) jose.JSONWebKeySet {
	t.Helper()
	resp, err := http.Get(base + "/oauth/jwks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	return set
}

func TestAuthorizeRefusesBadRequests(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	_, challenge := pkcePair()
	good := func() url.Values {
		return url.Values{"response_type": {"code"}, "client_id": {login.ConsoleClientID}, "redirect_uri": {ls.URL + "/console/auth/callback"},
			"scope": {"openid"}, "state": {"st"}, "nonce": {"nn"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	}
	tests := []struct {
		name   string
		mutate func(url.Values)
		// error is the error sent back to the client; "" means an error page
		// with no redirect at all.
		error string
	}{
		{"unregistered redirect URI", func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }, ""},
		{"redirect URI with extra path", func(q url.Values) { q.Set("redirect_uri", ls.URL+"/console/auth/callback/x") }, ""},
		{"unknown client", func(q url.Values) { q.Set("client_id", "stranger") }, ""},
		{"no PKCE", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, "invalid_request"},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }, "invalid_request"},
		{"implicit flow", func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
		{"not OpenID", func(q url.Values) { q.Set("scope", "profile") }, "invalid_scope"},
		{"no nonce", func(q url.Values) { q.Del("nonce") }, "invalid_request"},
		{"prompt=none without a session", func(q url.Values) { q.Set("prompt", "none") }, "login_required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := good()
			tt.mutate(q)
			p := formbrowser.New(t).Get(ls.URL + "/oauth/authorize?" + q.Encode())
			if tt.error == "" {
				if p.Status != http.StatusBadRequest || p.Location != "" || !strings.Contains(p.Body, "Sign-in request refused") {
					t.Fatalf("want an error page without redirect, got %d %q", p.Status, p.Location)
				}
				return
			}
			rq := webtest.MustQuery(t, p.Location)
			// RFC 9207: error responses name the issuer too.
			if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, ls.URL+"/console/auth/callback?") ||
				rq.Get("error") != tt.error || rq.Get("state") != "st" || rq.Get("iss") != ls.URL {
				t.Fatalf("want %s back at the client, got %d %s", tt.error, p.Status, p.Location)
			}
		})
	}
}

func TestEndSessionRefusesUnregisteredReturn(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	b := formbrowser.New(t)
	q := url.Values{"client_id": {login.ConsoleClientID}, "post_logout_redirect_uri": {"https://evil.example/"}}
	if p := b.Get(ls.URL + "/oauth/end_session?" + q.Encode()); p.Status != http.StatusBadRequest || p.Location != "" {
		t.Fatalf("unregistered post-logout address: %d %s", p.Status, p.Location)
	}
	q.Set("post_logout_redirect_uri", ls.URL+"/console/signed-out")
	q.Set("state", "s1")
	if p := b.Get(ls.URL + "/oauth/end_session?" + q.Encode()); p.Status != http.StatusSeeOther || p.Location != ls.URL+"/console/signed-out?state=s1" {
		t.Fatalf("registered post-logout address: %d %s", p.Status, p.Location)
	}
	q.Set("id_token_hint", "eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
	if p := b.Get(ls.URL + "/oauth/end_session?" + q.Encode()); p.Status != http.StatusBadRequest {
		t.Fatalf("a forged id_token_hint: %d %s", p.Status, p.Location)
	}
}

// TestUserInfoChallenges: userinfo names invalid_token only when a token
// came (RFC 6750 section 3.1).
func TestUserInfoChallenges(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	for _, tt := range []struct {
		name, authorization, want string
	}{
		{"no credentials", "", `Bearer realm="flowd"`},
		{"another scheme", "Basic Zm9vOmJhcg==", `Bearer realm="flowd"`},
		{"an unknown token", "Bearer not-a-token", `Bearer realm="flowd", error="invalid_token"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, ls.URL+"/oauth/userinfo", nil)
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != tt.want {
				t.Fatalf("%d, WWW-Authenticate %q, want %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tt.want)
			}
		})
	}
}
