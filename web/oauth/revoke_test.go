package oauth_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	zclient "github.com/zitadel/oidc/v3/pkg/client"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/client/rs"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"golang.org/x/oauth2"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/identitytest"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/webtest"
	"github.com/flowd/flowd/web/oauth"
	"github.com/flowd/flowd/web/openapi/openapitest"
)

// The tests of this file use zitadel/oidc's client packages, which flowd's
// own code does not use, as an independent implementation of RFC 7009 and
// RFC 7662, and check every answer against the OpenAPI document.

// instance starts another flowd web server on ts's database, with an
// identity module of its own (its own caches); with listen, the module runs
// its change listener as serve does. It returns the server's URL.
func instance(t *testing.T, ts webtest.OAuthServer, listen bool) string {
	t.Helper()
	cfg, err := config.Load(func(k string) string { return map[string]string{"FLOWD_BASE_URL": ts.URL}[k] }, config.Need{})
	if err != nil {
		t.Fatal(err)
	}
	id := identitytest.New(t, ts.Pool, ts.Cfg)
	if listen {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = id.Feed.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	srv := webtest.NewServer(t, web.Deps{Config: cfg, Pool: ts.Pool, Tokens: id})
	srv.Echo().GET("/api/test-principal", func(c echo.Context) error {
		return httpkit.WriteJSON(c, http.StatusOK, httpkit.Principal(c))
	}, httpkit.Authenticate(id, id), httpkit.RequireScope(identity.ScopeFlowsRead))
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

// apiStatus calls the authenticated test route of base with token.
func apiStatus(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/test-principal", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// clientToken gets a token pair for c by client credentials.
func clientToken(t *testing.T, ts webtest.OAuthServer, c orgs.ClientCredentials) oauth.TokenResponse {
	t.Helper()
	resp, body := webtest.PostToken(t, ts.URL+"/oauth/token", webtest.FormType, webtest.Form("grant_type", "client_credentials"), webtest.Basic(c.ID, c.Secret))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %d %v", resp.StatusCode, body)
	}
	return oauth.TokenResponse{AccessToken: body["access_token"].(string), RefreshToken: body["refresh_token"].(string)}
}

// TestIndependentClientRevokesAndIntrospects has zitadel/oidc discover the
// provider, obtain tokens, introspect them as a resource server and revoke
// them as a relying party, with each client authentication method.
func TestIndependentClientRevokesAndIntrospects(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	ctx := context.Background()
	hc := &http.Client{Transport: openapitest.Transport(t, nil)}

	disc, err := zclient.Discover(ctx, ts.URL, hc)
	if err != nil {
		t.Fatal(err)
	}
	methods := []zoidc.AuthMethod{zoidc.AuthMethodBasic, zoidc.AuthMethodPost, zoidc.AuthMethodPrivateKeyJWT}
	if disc.RevocationEndpoint != ts.URL+"/oauth/revoke" || disc.IntrospectionEndpoint != ts.URL+"/oauth/introspect" ||
		!slices.Equal(disc.RevocationEndpointAuthMethodsSupported, methods) || !slices.Equal(disc.IntrospectionEndpointAuthMethodsSupported, methods) {
		t.Fatalf("discovery: revocation %q %v, introspection %q %v", disc.RevocationEndpoint, disc.RevocationEndpointAuthMethodsSupported,
			disc.IntrospectionEndpoint, disc.IntrospectionEndpointAuthMethodsSupported)
	}

	for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
		party, err := rp.NewRelyingPartyOIDC(ctx, ts.URL, ts.Full.ID, ts.Full.Secret, "", nil, rp.WithAuthStyle(style), rp.WithHTTPClient(hc))
		if err != nil {
			t.Fatal(err)
		}
		resource, err := rs.NewResourceServerClientCredentials(ctx, ts.URL, ts.Full.ID, ts.Full.Secret, rs.WithClient(hc))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := rp.ClientCredentials(ctx, party, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := apiStatus(t, ts.URL, tok.AccessToken); got != http.StatusOK {
			t.Fatalf("style %v: the new token: %d", style, got)
		}

		in, err := rs.Introspect[*zoidc.IntrospectionResponse](ctx, resource, tok.AccessToken)
		if err != nil {
			t.Fatal(err)
		}
		if !in.Active || in.ClientID != ts.Full.ID || in.Subject != ts.Full.ID || in.TokenType != "Bearer" || in.Issuer != ts.URL ||
			!slices.Contains(in.Audience, "flowd") || in.JWTID == "" || len(in.Scope) != len(identity.AllScopes) ||
			in.Claims["org_id"] != ts.Org.ID || time.Until(in.Expiration.AsTime()) < 250*time.Second || in.IssuedAt.AsTime().IsZero() {
			t.Fatalf("style %v: introspecting the access token: %+v", style, in)
		}
		in, err = rs.Introspect[*zoidc.IntrospectionResponse](ctx, resource, tok.RefreshToken)
		if err != nil {
			t.Fatal(err)
		}
		if !in.Active || in.TokenType != tokens.TokenTypeRefresh || in.ClientID != ts.Full.ID || in.Claims["org_id"] != ts.Org.ID {
			t.Fatalf("style %v: introspecting the refresh token: %+v", style, in)
		}

		if err := rp.RevokeToken(ctx, party, tok.AccessToken, tokens.TokenTypeAccess); err != nil {
			t.Fatalf("style %v: revoking the access token: %v", style, err)
		}
		if got := apiStatus(t, ts.URL, tok.AccessToken); got != http.StatusUnauthorized {
			t.Fatalf("style %v: the revoked access token: %d", style, got)
		}
		if err := rp.RevokeToken(ctx, party, tok.RefreshToken, tokens.TokenTypeRefresh); err != nil {
			t.Fatalf("style %v: revoking the refresh token: %v", style, err)
		}
		for _, raw := range []string{tok.AccessToken, tok.RefreshToken} {
			in, err := rs.Introspect[*zoidc.IntrospectionResponse](ctx, resource, raw)
			// Claims holds every member of the answer: active alone.
			if err != nil || in.Active || len(in.Claims) != 1 {
				t.Fatalf("style %v: introspecting a revoked token: %+v %v", style, in, err)
			}
		}
		resp, body := webtest.PostToken(t, ts.URL+"/oauth/token", webtest.FormType, webtest.Form("grant_type", "refresh_token", "refresh_token", tok.RefreshToken), webtest.Basic(ts.Full.ID, ts.Full.Secret))
		if resp.StatusCode != http.StatusBadRequest || body["error"] != tokens.ErrCodeInvalidGrant {
			t.Fatalf("style %v: refreshing with a revoked token: %d %v", style, resp.StatusCode, body)
		}
	}

	wrong, err := rp.NewRelyingPartyOIDC(ctx, ts.URL, ts.Full.ID, "wrong", "", nil, rp.WithAuthStyle(oauth2.AuthStyleInHeader), rp.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.RevokeToken(ctx, wrong, clientToken(t, ts, ts.Full).AccessToken, ""); err == nil {
		t.Fatal("revocation with a wrong secret succeeded")
	}
}

// clientPost sends a form to one of the provider's endpoints through the
// validating client and returns the status, the headers and the body.
func clientPost(t *testing.T, endpoint, authorization, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", webtest.FormType)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := openapitest.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, strings.TrimSuffix(string(b), "\n")
}

// TestRevocationAnswers sends the revocation endpoint what RFC 7009 names:
// a token of the client, of another client, unknown or malformed, and bad
// client authentication. Every 200 has an empty body.
func TestRevocationAnswers(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	revoke := ts.URL + "/oauth/revoke"
	own := webtest.Basic(ts.Full.ID, ts.Full.Secret)
	tests := []struct {
		name      string
		auth      string
		body      func(mine, theirs oauth.TokenResponse) string
		status    int
		errorCode string
		// revoked says whether the client's own access token is refused afterwards.
		revoked bool
	}{
		{"own access token, hinted", own, func(m, _ oauth.TokenResponse) string {
			return webtest.Form("token", m.AccessToken, "token_type_hint", "access_token")
		}, 200, "", true},
		{"own access token, hinted wrongly", own, func(m, _ oauth.TokenResponse) string {
			return webtest.Form("token", m.AccessToken, "token_type_hint", "refresh_token")
		}, 200, "", true},
		{"own access token, unknown hint", own, func(m, _ oauth.TokenResponse) string {
			return webtest.Form("token", m.AccessToken, "token_type_hint", "id_token")
		}, 200, "", true},
		{"own access token, client in the form", "", func(m, _ oauth.TokenResponse) string {
			return webtest.Form("token", m.AccessToken, "client_id", ts.Full.ID, "client_secret", ts.Full.Secret)
		}, 200, "", true},
		{"another client's access token", own, func(_, o oauth.TokenResponse) string { return webtest.Form("token", o.AccessToken) }, 200, "", false},
		{"another client's refresh token", own, func(_, o oauth.TokenResponse) string { return webtest.Form("token", o.RefreshToken) }, 200, "", false},
		{"unknown refresh token", own, func(_, _ oauth.TokenResponse) string { return webtest.Form("token", "frt_unknown") }, 200, "", false},
		{"garbage", own, func(_, _ oauth.TokenResponse) string { return webtest.Form("token", "not a token at all") }, 200, "", false},
		{"no token", own, func(_, _ oauth.TokenResponse) string { return webtest.Form("token_type_hint", "access_token") }, 400, "invalid_request", false},
		{"wrong secret in Basic", webtest.Basic(ts.Full.ID, "wrong"), func(m, _ oauth.TokenResponse) string { return webtest.Form("token", m.AccessToken) }, 401, "invalid_client", false},
		{"wrong secret in the form", "", func(m, _ oauth.TokenResponse) string {
			return webtest.Form("token", m.AccessToken, "client_id", ts.Full.ID, "client_secret", "wrong")
		}, 401, "invalid_client", false},
		{"no client authentication", "", func(m, _ oauth.TokenResponse) string { return webtest.Form("token", m.AccessToken) }, 401, "invalid_client", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mine, theirs := clientToken(t, ts, ts.Full), clientToken(t, ts, ts.Reader)
			status, header, body := clientPost(t, revoke, tt.auth, tt.body(mine, theirs))
			if status != tt.status {
				t.Fatalf("%d %s, want %d", status, body, tt.status)
			}
			if header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q", header.Get("Cache-Control"))
			}
			if tt.errorCode == "" && body != "" {
				t.Errorf("body %q, want none", body)
			}
			if tt.errorCode != "" {
				var e oauth.TokenErrorResponse
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error != tt.errorCode || e.ErrorDescription == "" {
					t.Errorf("error %q, want %s", body, tt.errorCode)
				}
			}
			if got, want := header.Get("WWW-Authenticate") != "", tt.status == 401 && tt.auth != ""; got != want {
				t.Errorf("WWW-Authenticate %q", header.Get("WWW-Authenticate"))
			}
			wantStatus := http.StatusOK
			if tt.revoked {
				wantStatus = http.StatusUnauthorized
			}
			if got := apiStatus(t, ts.URL, mine.AccessToken); got != wantStatus {
				t.Errorf("the client's access token afterwards: %d, want %d", got, wantStatus)
			}
			if got := apiStatus(t, ts.URL, theirs.AccessToken); got != http.StatusForbidden { // the reader lacks the test route's scope
				t.Errorf("the other client's access token afterwards: %d, want 403", got)
			}
			resp, refreshed := webtest.PostToken(t, ts.URL+"/oauth/token", webtest.FormType, webtest.Form("grant_type", "refresh_token", "refresh_token", theirs.RefreshToken),
				webtest.Basic(ts.Reader.ID, ts.Reader.Secret))
			if resp.StatusCode != http.StatusOK {
				t.Errorf("the other client's refresh token afterwards: %d %v", resp.StatusCode, refreshed)
			}
		})
	}
}

// TestIntrospectionAnswers introspects tokens in every state through the
// validating client: an active one answers its claims, any other only
// {"active":false}.
func TestIntrospectionAnswers(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	ts := webtest.SetupOAuth(t, func(c *identitytest.Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	introspect := ts.URL + "/oauth/introspect"
	own := webtest.Basic(ts.Full.ID, ts.Full.Secret)
	tok, theirs, revoked := clientToken(t, ts, ts.Full), clientToken(t, ts, ts.Reader), clientToken(t, ts, ts.Full)
	for _, raw := range []string{revoked.AccessToken, revoked.RefreshToken} {
		if status, _, body := clientPost(t, ts.URL+"/oauth/revoke", own, webtest.Form("token", raw)); status != 200 {
			t.Fatalf("revoke: %d %s", status, body)
		}
	}
	inactive := `{"active":false}`
	tests := []struct {
		name string
		auth string
		tok  string
		want func(t *testing.T, body map[string]any)
	}{
		{"own access token", own, tok.AccessToken, func(t *testing.T, b map[string]any) {
			for k, v := range map[string]any{"active": true, "client_id": ts.Full.ID, "sub": ts.Full.ID, "token_type": "Bearer",
				"aud": "flowd", "iss": ts.URL, "org_id": ts.Org.ID, "scope": strings.Join(identity.AllScopes, " ")} {
				if b[k] != v {
					t.Errorf("%s = %v, want %v", k, b[k], v)
				}
			}
			for _, k := range []string{"exp", "iat", "nbf", "jti"} {
				if b[k] == nil {
					t.Errorf("%s missing", k)
				}
			}
		}},
		{"own refresh token", own, tok.RefreshToken, func(t *testing.T, b map[string]any) {
			if b["active"] != true || b["token_type"] != "refresh_token" || b["org_id"] != ts.Org.ID || b["jti"] != nil || b["exp"] == nil {
				t.Errorf("%v", b)
			}
		}},
		{"the other client's own token", webtest.Basic(ts.Reader.ID, ts.Reader.Secret), theirs.AccessToken, func(t *testing.T, b map[string]any) {
			if b["active"] != true || b["client_id"] != ts.Reader.ID || b["scope"] != identity.ScopeFlowsRead {
				t.Errorf("%v", b)
			}
		}},
		{"another client's access token", own, theirs.AccessToken, nil},
		{"another client's refresh token", own, theirs.RefreshToken, nil},
		{"revoked access token", own, revoked.AccessToken, nil},
		{"revoked refresh token", own, revoked.RefreshToken, nil},
		{"unknown", own, "frt_unknown", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, header, body := clientPost(t, introspect, tt.auth, webtest.Form("token", tt.tok))
			if status != 200 || header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d %q %s", status, header.Get("Cache-Control"), body)
			}
			if tt.want == nil {
				if body != inactive {
					t.Fatalf("%s, want only %s", body, inactive)
				}
				return
			}
			var b map[string]any
			if err := json.Unmarshal([]byte(body), &b); err != nil {
				t.Fatal(err)
			}
			tt.want(t, b)
		})
	}

	if status, _, body := clientPost(t, introspect, webtest.Basic(ts.Full.ID, "wrong"), webtest.Form("token", tok.AccessToken)); status != 401 || !strings.Contains(body, "invalid_client") {
		t.Fatalf("wrong secret: %d %s", status, body)
	}
	offset.Store(int64(31 * time.Minute))
	for _, raw := range []string{tok.AccessToken, tok.RefreshToken} {
		if _, _, body := clientPost(t, introspect, own, webtest.Form("token", raw)); body != inactive {
			t.Fatalf("an expired token: %s", body)
		}
	}
}

// TestRevokedAccessTokenIsRefusedByEveryInstance revokes through one server
// a token that two others, on the same database, have admitted: the one
// without a change listener refuses it at once (it reads the database), the
// listening one as soon as the notification reaches it.
func TestRevokedAccessTokenIsRefusedByEveryInstance(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	listening, cold := instance(t, ts, true), instance(t, ts, false)
	tok, kept := clientToken(t, ts, ts.Full), clientToken(t, ts, ts.Full)
	for _, base := range []string{listening, cold} {
		if got := apiStatus(t, base, tok.AccessToken); got != http.StatusOK {
			t.Fatalf("%s before revocation: %d", base, got)
		}
	}
	if status, _, body := clientPost(t, ts.URL+"/oauth/revoke", webtest.Basic(ts.Full.ID, ts.Full.Secret), webtest.Form("token", tok.AccessToken)); status != 200 {
		t.Fatalf("revoke: %d %s", status, body)
	}
	if got := apiStatus(t, ts.URL, tok.AccessToken); got != http.StatusUnauthorized {
		t.Fatalf("the revoking instance: %d", got)
	}
	if got := apiStatus(t, cold, tok.AccessToken); got != http.StatusUnauthorized {
		t.Fatalf("the instance without a listener: %d", got)
	}
	deadline := testwait.Deadline(t)
	for apiStatus(t, listening, tok.AccessToken) != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("the listening instance still admits the revoked token at the test's deadline")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, base := range []string{ts.URL, listening, cold} {
		if got := apiStatus(t, base, kept.AccessToken); got != http.StatusOK {
			t.Fatalf("%s: another token of the client: %d", base, got)
		}
	}
}
