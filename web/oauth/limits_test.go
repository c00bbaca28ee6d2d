package oauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	zclient "github.com/zitadel/oidc/v3/pkg/client"

	"github.com/flowd/flowd/modules/identity/identitytest"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens"
	"github.com/flowd/flowd/web/internal/webtest"
)

// tokenFrom asks for a client_credentials token with body and authorization
// from addr: the test server's peer is loopback, and addr, when given, is
// what a proxy in front would have put in X-Forwarded-For.
func tokenFrom(t *testing.T, ts webtest.OAuthServer, addr, body, authorization string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/oauth/token", strings.NewReader(body))
	req.Header.Set("Content-Type", webtest.FormType)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	return webtest.SendTokenRequest(t, http.DefaultClient, req)
}

// dropSecretMAC makes a client's secret as one stored before secrets had
// MACs: only argon2id can check it, which is the costly path.
func dropSecretMAC(t *testing.T, ts webtest.OAuthServer, clientID string) {
	t.Helper()
	if _, err := ts.Pool.Exec(context.Background(), "update api_clients set secret_mac = null where id = $1", clientID); err != nil {
		t.Fatal(err)
	}
}

// TestWrongCredentialsLockNoClientOut: a hundred wrong secrets and bad
// assertions in the name of a client, from a hundred other addresses and
// from the client's own, leave its right secret and its good assertion at
// 200.
func TestWrongCredentialsLockNoClientOut(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuthWith(t, map[string]string{"FLOWD_TRUSTED_PROXIES": "127.0.0.1"}, nil)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	signer, err := zclient.NewSignerFromPrivateKeyByte(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), "k")
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ = x509.MarshalPKCS8PrivateKey(forged)
	forger, _ := zclient.NewSignerFromPrivateKeyByte(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), "k")
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Use: "sig"}}})
	keyed, err := ts.Identity.CreateClient(context.Background(), orgs.NewClient{OrganizationID: ts.Org.ID, Keys: orgs.ClientKeys{JWKS: jwks}})
	if err != nil {
		t.Fatal(err)
	}
	assertion := func(s jose.Signer) string {
		a, err := zclient.SignedJWTProfileAssertion(keyed.ID, []string{ts.URL + "/oauth/token"}, time.Minute, s)
		if err != nil {
			t.Fatal(err)
		}
		return webtest.Form("grant_type", "client_credentials", "client_assertion_type", tokens.ClientAssertionType, "client_assertion", a)
	}

	const own = "198.51.100.7"
	for i := range 100 {
		for _, addr := range []string{fmt.Sprintf("203.0.113.%d", i), own} {
			if resp, body := tokenFrom(t, ts, addr, webtest.Form("grant_type", "client_credentials"), webtest.Basic(ts.Full.ID, "fcs_wrong")); resp.StatusCode != 401 {
				t.Fatalf("a wrong secret from %s: %d %v", addr, resp.StatusCode, body)
			}
			if resp, body := tokenFrom(t, ts, addr, assertion(forger), ""); resp.StatusCode != 401 {
				t.Fatalf("a forged assertion from %s: %d %v", addr, resp.StatusCode, body)
			}
		}
	}
	if resp, body := tokenFrom(t, ts, own, webtest.Form("grant_type", "client_credentials"), webtest.Basic(ts.Full.ID, ts.Full.Secret)); resp.StatusCode != 200 {
		t.Fatalf("the right secret after 200 wrong ones: %d %v", resp.StatusCode, body)
	}
	if resp, body := tokenFrom(t, ts, own, assertion(signer), ""); resp.StatusCode != 200 {
		t.Fatalf("a good assertion after 200 forged ones: %d %v", resp.StatusCode, body)
	}
}

// TestCostlyFailuresCountPerRealAddress: behind a trusted proxy the limit
// on costly failures (argon2id of a secret without a MAC) counts per client
// and address in X-Forwarded-For, the rightmost one the proxy did not add
// itself; without a trusted proxy the header is ignored and every request
// is the peer's. Failures in one client's name never hold up another's
// right secret, from any address.
func TestCostlyFailuresCountPerRealAddress(t *testing.T) {
	t.Parallel()
	limit := func(c *identitytest.Config) { c.AddressFailureLimit = 3 }
	const guesser, other = "203.0.113.5", "203.0.113.6"
	grant := webtest.Form("grant_type", "client_credentials")

	t.Run("behind a trusted proxy", func(t *testing.T) {
		t.Parallel()
		ts := webtest.SetupOAuthWith(t, map[string]string{"FLOWD_TRUSTED_PROXIES": "127.0.0.0/8"}, limit)
		dropSecretMAC(t, ts, ts.Full.ID)
		dropSecretMAC(t, ts, ts.Reader.ID)
		wrong := webtest.Basic(ts.Full.ID, "fcs_wrong")
		for range 3 {
			if resp, body := tokenFrom(t, ts, guesser, grant, wrong); resp.StatusCode != 401 {
				t.Fatalf("a wrong secret: %d %v", resp.StatusCode, body)
			}
		}
		resp, body := tokenFrom(t, ts, guesser, grant, wrong)
		if resp.StatusCode != 429 || body["error"] != "slow_down" || body["error_description"] == nil {
			t.Fatalf("after 3 costly failures: %d %v", resp.StatusCode, body)
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
			t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
		}
		// Another client without a MAC is not held up from the same address.
		if resp, body := tokenFrom(t, ts, guesser, grant, webtest.Basic(ts.Reader.ID, ts.Reader.Secret)); resp.StatusCode != 200 {
			t.Fatalf("another client's right secret from the guesser's address: %d %v", resp.StatusCode, body)
		}
		// An address the guesser writes in front of its own is not believed.
		if resp, body := tokenFrom(t, ts, other+", "+guesser, grant, webtest.Basic(ts.Full.ID, ts.Full.Secret)); resp.StatusCode != 429 {
			t.Fatalf("a costly check with a made-up first hop: %d %v", resp.StatusCode, body)
		}
		if resp, body := tokenFrom(t, ts, other, grant, webtest.Basic(ts.Full.ID, ts.Full.Secret)); resp.StatusCode != 200 {
			t.Fatalf("another address behind the proxy: %d %v", resp.StatusCode, body)
		}
		// Once checked, the secret has a MAC and passes from the guesser's address too.
		if resp, body := tokenFrom(t, ts, guesser, grant, webtest.Basic(ts.Full.ID, ts.Full.Secret)); resp.StatusCode != 200 {
			t.Fatalf("a secret with a MAC from the limited address: %d %v", resp.StatusCode, body)
		}
	})
	t.Run("from an untrusted peer", func(t *testing.T) {
		t.Parallel()
		ts := webtest.SetupOAuthWith(t, nil, limit)
		dropSecretMAC(t, ts, ts.Full.ID)
		dropSecretMAC(t, ts, ts.Reader.ID)
		for i := range 3 {
			if resp, body := tokenFrom(t, ts, fmt.Sprintf("198.51.100.%d", i), grant, webtest.Basic(ts.Full.ID, "fcs_wrong")); resp.StatusCode != 401 {
				t.Fatalf("a wrong secret: %d %v", resp.StatusCode, body)
			}
		}
		if resp, body := tokenFrom(t, ts, other, grant, webtest.Basic(ts.Full.ID, ts.Full.Secret)); resp.StatusCode != 429 {
			t.Fatalf("X-Forwarded-For was believed from an untrusted peer: %d %v", resp.StatusCode, body)
		}
		// Every caller is the peer, and another client is not held up by them.
		if resp, body := tokenFrom(t, ts, other, grant, webtest.Basic(ts.Reader.ID, ts.Reader.Secret)); resp.StatusCode != 200 {
			t.Fatalf("another client's right secret from the same peer: %d %v", resp.StatusCode, body)
		}
	})
}
