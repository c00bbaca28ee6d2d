package e2e

import (
	"crypto/ecdsa"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/internal/testkit/browsertest"
	"github.com/flowd/flowd/internal/testkit/testkeys"
)

// TestConsolePrivateKeyJWTClientInABrowser: an admin creates an API client
// that authenticates with private_key_jwt by pasting its public keys (a
// private key pasted first is refused inline), the client obtains a token
// with an assertion, and the admin replaces its keys: the old key stops
// working and the new one works. Then the admin requires DPoP of it: a
// token request without a proof is refused. Each action is in the audit log.
func TestConsolePrivateKeyJWTClientInABrowser(t *testing.T) {
	t.Parallel()
	e := startConsole(t)
	base := e.in.URL
	first, second := testkeys.EC(t), testkeys.EC(t)
	b := browsertest.New(t, browsertest.Desktop)
	shot := func(name string) { b.Screenshot("desktop-pkjwt-" + name) }
	signInBrowser(t, b, base, "ada@acme.example", nil)

	navigate(t, b, base+"/console/credentials/clients/new")
	private, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: first, KeyID: "one"}}})
	b.Run(chromedp.SetValue("#name", "Bank signer", chromedp.ByQuery),
		chromedp.Click(`input[name=auth][value=private_key_jwt]`, chromedp.ByQuery),
		chromedp.SetValue("#jwks", string(private), chromedp.ByQuery))
	shot("01-new-client")
	clickTo(t, b, `form[action="/console/credentials/clients"] button[type=submit]`, "/console/credentials/clients")
	wantText(t, b, "holds a private key")
	var kept string
	b.Run(chromedp.Value("#jwks", &kept, chromedp.ByQuery))
	if kept != "" {
		t.Fatal("the refused form shows the private key back")
	}
	shot("02-private-key-refused")
	var checked bool
	b.Run(chromedp.Evaluate(`document.querySelector("input[name=auth][value=private_key_jwt]").checked`, &checked))
	if !checked {
		t.Fatal("the refused form forgot the choice of private key JWT")
	}
	b.Run(chromedp.SetValue("#jwks", string(testkeys.PublicJWKS(t, "one", first)), chromedp.ByQuery))
	clickTo(t, b, `form[action="/console/credentials/clients"] button[type=submit]`, "/console/credentials/clients")
	wantText(t, b, "API client created", "private_key_jwt")
	notText(t, b, "only time it is shown")
	shot("03-client-created")
	var clientID string
	b.Run(chromedp.Text(`dl.kv dd code`, &clientID, chromedp.ByQuery))
	if s := assertionStatus(t, base, clientID, first, "one"); s != http.StatusOK {
		t.Fatalf("a token with the registered key: %d", s)
	}

	navigate(t, b, base+"/console/credentials")
	wantText(t, b, "Bank signer", "private key JWT")
	clickTo(t, b, `a[href="/console/credentials/clients/`+clientID+`/keys"]`, "/keys")
	wantText(t, b, "Keys of Bank signer", "given inline")
	b.Run(chromedp.SetValue("#jwks", string(testkeys.PublicJWKS(t, "two", second)), chromedp.ByQuery))
	shot("04-replace-keys")
	clickTo(t, b, `form[action$="/keys"] button[type=submit]`, "notice=keys")
	wantText(t, b, "The keys of API client Bank signer were replaced")
	if s := assertionStatus(t, base, clientID, first, "one"); s != http.StatusUnauthorized {
		t.Fatalf("the replaced key: %d", s)
	}
	if s := assertionStatus(t, base, clientID, second, "two"); s != http.StatusOK {
		t.Fatalf("the new key: %d", s)
	}

	navigate(t, b, base+"/console/credentials")
	clickTo(t, b, `form[action="/console/credentials/clients/`+clientID+`/dpop"] button[type=submit]`, "notice=dpop_on")
	wantText(t, b, "API client Bank signer must now use DPoP", "DPoP required", "Stop requiring DPoP")
	shot("05-dpop-required")
	if s := assertionStatus(t, base, clientID, second, "two"); s != http.StatusBadRequest {
		t.Fatalf("a token request without a DPoP proof from a client required to use DPoP: %d", s)
	}

	navigate(t, b, base+"/console/audit")
	wantText(t, b, "client.create", "client.replace_keys", "client.dpop", "auth private_key_jwt (keys given inline)")
	notText(t, b, `"kty"`)
	shot("06-audit")
}

// assertionStatus asks for a token with a client assertion signed by k.
func assertionStatus(t *testing.T, base, clientID string, k *ecdsa.PrivateKey, kid string) int {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": clientID, "sub": clientID, "aud": base,
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": now.Format(time.RFC3339Nano)})
	jws, err := signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	assertion, _ := jws.CompactSerialize()
	resp, err := http.PostForm(base+"/oauth/token", url.Values{"grant_type": {"client_credentials"},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {assertion}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
