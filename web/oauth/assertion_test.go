package oauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	zclient "github.com/zitadel/oidc/v3/pkg/client"
	httphelper "github.com/zitadel/oidc/v3/pkg/http"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens"
	"github.com/flowd/flowd/web/internal/webtest"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

// endpoints is what zitadel/oidc's low-level calls need to know of flowd.
type endpoints struct {
	disc *zoidc.DiscoveryConfiguration
	hc   *http.Client
}

func (e endpoints) TokenEndpoint() string     { return e.disc.TokenEndpoint }
func (e endpoints) GetRevokeEndpoint() string { return e.disc.RevocationEndpoint }
func (e endpoints) HttpClient() *http.Client  { return e.hc }

// TestPrivateKeyJWTWithIndependentClient registers a client by its public
// key, and has zitadel/oidc make the client assertions: it obtains a token,
// calls the API with it, introspects it and revokes it, each time
// authenticating with private_key_jwt, through the validating client.
// zitadel's relying-party helpers sign assertions valid for an hour, longer
// than flowd accepts, so the test signs with its SignedJWTProfileAssertion
// and sends them with its endpoint calls.
func TestPrivateKeyJWTWithIndependentClient(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	signer, err := zclient.NewSignerFromPrivateKeyByte(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), "bank-key-1")
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "bank-key-1", Use: "sig"}}})
	cc, err := ts.Identity.CreateClient(ctx, orgs.NewClient{OrganizationID: ts.Org.ID, Name: "Bank", Keys: orgs.ClientKeys{JWKS: jwks}})
	if err != nil || cc.Secret != "" {
		t.Fatalf("creating an assertion-only client: %+v %v", cc, err)
	}

	hc := &http.Client{Transport: openapitest.Transport(t, nil)}
	disc, err := zclient.Discover(ctx, ts.URL, hc)
	if err != nil {
		t.Fatal(err)
	}
	ep := endpoints{disc: disc, hc: hc}
	assertion := func(aud string) httphelper.FormAuthorization {
		a, err := zclient.SignedJWTProfileAssertion(cc.ID, []string{aud}, time.Minute, signer)
		if err != nil {
			t.Fatal(err)
		}
		return zclient.ClientAssertionFormAuthorization(a)
	}

	tok, err := zclient.CallTokenEndpointWithAuthFn(ctx, zoidc.ClientCredentialsRequest{GrantType: zoidc.GrantTypeClientCredentials},
		assertion(disc.Issuer), ep)
	if err != nil {
		t.Fatalf("a token by private_key_jwt: %v", err)
	}
	if got := apiStatus(t, ts.URL, tok.AccessToken); got != http.StatusOK {
		t.Fatalf("the API with the token: %d", got)
	}

	introspect := func(raw string) *zoidc.IntrospectionResponse {
		t.Helper()
		req, err := httphelper.FormRequest(ctx, disc.IntrospectionEndpoint, &zoidc.IntrospectionRequest{Token: raw}, zclient.Encoder, assertion(disc.TokenEndpoint))
		if err != nil {
			t.Fatal(err)
		}
		in := new(zoidc.IntrospectionResponse)
		if err := httphelper.HttpRequest(hc, req, in); err != nil {
			t.Fatalf("introspecting by private_key_jwt: %v", err)
		}
		return in
	}
	if in := introspect(tok.AccessToken); !in.Active || in.ClientID != cc.ID {
		t.Fatalf("introspecting the token: %+v", in)
	}
	if err := zclient.CallRevokeEndpoint(ctx, zclient.RevokeRequest{Token: tok.AccessToken, ClientID: cc.ID}, assertion(disc.Issuer), ep); err != nil {
		t.Fatalf("revoking by private_key_jwt: %v", err)
	}
	if got := apiStatus(t, ts.URL, tok.AccessToken); got != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %d", got)
	}
	if in := introspect(tok.AccessToken); in.Active {
		t.Fatalf("introspecting the revoked token: %+v", in)
	}

	// One assertion authenticates once; a secret does not authenticate this client.
	once := assertion(disc.Issuer)
	if _, err := zclient.CallTokenEndpointWithAuthFn(ctx, zoidc.ClientCredentialsRequest{GrantType: zoidc.GrantTypeClientCredentials}, once, ep); err != nil {
		t.Fatal(err)
	}
	status, _, body := clientPost(t, disc.TokenEndpoint, "", webtest.Form("grant_type", "client_credentials", "client_assertion_type", tokens.ClientAssertionType,
		"client_assertion", formValue(once, "client_assertion")))
	if status != http.StatusUnauthorized || !json.Valid([]byte(body)) {
		t.Fatalf("a replayed assertion: %d %s", status, body)
	}
	status, _, body = clientPost(t, disc.TokenEndpoint, webtest.Basic(cc.ID, "fcs_guess"), webtest.Form("grant_type", "client_credentials"))
	if status != http.StatusUnauthorized {
		t.Fatalf("a secret for an assertion-only client: %d %s", status, body)
	}
	status, _, body = clientPost(t, disc.TokenEndpoint, webtest.Basic(ts.Full.ID, ts.Full.Secret), webtest.Form("grant_type", "client_credentials",
		"client_assertion_type", tokens.ClientAssertionType, "client_assertion", formValue(assertion(disc.Issuer), "client_assertion")))
	if status != http.StatusBadRequest {
		t.Fatalf("an assertion beside HTTP Basic: %d %s", status, body)
	}
}

// formValue returns the value auth sets for name.
func formValue(auth httphelper.FormAuthorization, name string) string {
	v := map[string][]string{}
	auth(v)
	return v[name][0]
}
