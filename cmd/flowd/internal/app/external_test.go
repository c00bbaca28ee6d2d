package app_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// TestExternalIssuerThroughServe starts a small OIDC issuer and flowd
// configured to accept its tokens (FLOWD_OIDC_ISSUER, FLOWD_OIDC_AUDIENCE,
// FLOWD_ORG_CLAIM): a token naming the organization in the org claim is
// accepted, and so is one whose client id, only in aud, is mapped with
// `flowd clients map`.
func TestExternalIssuerThroughServe(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var issuer string
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": issuer, "jwks_uri": issuer + "/keys", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	idp := httptest.NewServer(mux)
	t.Cleanup(idp.Close)
	issuer = idp.URL
	sign := func(claims map[string]any) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(claims)
		jws, _ := s.Sign(b)
		raw, _ := jws.CompactSerialize()
		return raw
	}

	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_OIDC_ISSUER", issuer),
		flowdtest.WithEnv("FLOWD_OIDC_AUDIENCE", "api://flowd"), flowdtest.WithEnv("FLOWD_ORG_CLAIM", "tenant"))
	orgID := in.CLIJSON(t, "orgs", "create", "--name", "Ext Bank")["id"].(string)
	now := time.Now()
	claims := func(kv ...any) map[string]any {
		c := map[string]any{"iss": issuer, "sub": "svc", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
		for i := 0; i < len(kv); i += 2 {
			c[kv[i].(string)] = kv[i+1]
		}
		return c
	}
	byClaim := sign(claims("aud", "api://flowd", "tenant", orgID, "scope", "flows:read"))
	byAud := sign(claims("aud", "dex-app"))
	if s := flowdtest.BearerStatus(t, in.URL+flowdtest.NoSuchFlow, byClaim); s != 404 {
		t.Fatalf("external token with the org claim: %d", s)
	}
	if s := flowdtest.BearerStatus(t, in.URL+flowdtest.NoSuchFlow, byAud); s != 401 {
		t.Fatalf("unmapped client id in aud: %d", s)
	}
	in.CLI(t, "", "clients", "map", "--org", orgID, "--issuer", issuer, "--client-id", "dex-app")
	testwait.For(t, "a mapped client's token to be taken", func() (bool, string) {
		s := flowdtest.BearerStatus(t, in.URL+flowdtest.NoSuchFlow, byAud)
		return s == 404, fmt.Sprintf("a mapped client's token answered %d", s)
	})
	if s := flowdtest.BearerStatus(t, in.URL+flowdtest.NoSuchFlow, sign(claims("aud", "flowd", "tenant", orgID))); s != 401 {
		t.Fatalf("external token for an audience not configured: %d", s)
	}
}
