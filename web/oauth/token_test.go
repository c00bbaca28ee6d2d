package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/modules/identity/tokens"
	"github.com/flowd/flowd/web/internal/webtest"
	"github.com/flowd/flowd/web/oauth"
)

func TestTokenEndpointIssuesTokens(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	tokenURL := ts.URL + "/oauth/token"
	tests := []struct {
		name, body, auth, scope string
	}{
		{"client_secret_post", webtest.Form("grant_type", "client_credentials", "client_id", ts.Full.ID, "client_secret", ts.Full.Secret), "", strings.Join(identity.AllScopes, " ")},
		{"client_secret_basic", webtest.Form("grant_type", "client_credentials"), webtest.Basic(ts.Full.ID, ts.Full.Secret), strings.Join(identity.AllScopes, " ")},
		{"basic with client_id in the body too", webtest.Form("grant_type", "client_credentials", "client_id", ts.Full.ID), webtest.Basic(ts.Full.ID, ts.Full.Secret), strings.Join(identity.AllScopes, " ")},
		{"fewer scopes asked", webtest.Form("grant_type", "client_credentials", "scope", "flows:read"), webtest.Basic(ts.Full.ID, ts.Full.Secret), "flows:read"},
		{"unknown parameters are ignored", webtest.Form("grant_type", "client_credentials", "audience", "x"), webtest.Basic(ts.Full.ID, ts.Full.Secret), strings.Join(identity.AllScopes, " ")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := webtest.PostToken(t, tokenURL, webtest.FormType, tt.body, tt.auth)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %v", resp.StatusCode, body)
			}
			if resp.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("headers %v", resp.Header)
			}
			if body["token_type"] != "Bearer" || body["expires_in"] != 300.0 || body["refresh_expires_in"] != 1800.0 ||
				body["scope"] != tt.scope || body["access_token"] == "" || body["refresh_token"] == "" {
				t.Fatalf("body %v", body)
			}
		})
	}
}

func TestTokenEndpointErrors(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	tokenURL := ts.URL + "/oauth/token"
	revoked, err := ts.Identity.CreateClient(context.Background(), orgs.NewClient{OrganizationID: ts.Org.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Identity.RevokeClient(context.Background(), ts.Org.ID, revoked.ID); err != nil {
		t.Fatal(err)
	}
	post := func(kv ...string) string {
		return webtest.Form(append([]string{"client_id", ts.Full.ID, "client_secret", ts.Full.Secret}, kv...)...)
	}
	tests := []struct {
		name, contentType, body, auth string
		status                        int
		code                          string
		basicChallenge                bool
	}{
		{"JSON body", "application/json", `{"grant_type":"client_credentials"}`, "", 400, "invalid_request", false},
		{"no content type", "", post("grant_type", "client_credentials"), "", 400, "invalid_request", false},
		{"malformed form", webtest.FormType, "grant_type=%zz", "", 400, "invalid_request", false},
		{"no grant_type", webtest.FormType, post(), "", 400, "invalid_request", false},
		{"repeated parameter", webtest.FormType, post("grant_type", "client_credentials", "grant_type", "client_credentials"), "", 400, "invalid_request", false},
		{"basic and secret in the body", webtest.FormType, post("grant_type", "client_credentials"), webtest.Basic(ts.Full.ID, ts.Full.Secret), 400, "invalid_request", false},
		{"basic and another client_id in the body", webtest.FormType, webtest.Form("grant_type", "client_credentials", "client_id", ts.Reader.ID), webtest.Basic(ts.Full.ID, ts.Full.Secret), 400, "invalid_request", false},
		{"unsupported grant", webtest.FormType, post("grant_type", "password"), "", 400, "unsupported_grant_type", false},
		{"authorization_code without a login client", webtest.FormType, post("grant_type", "authorization_code", "code", "x"), "", 401, "invalid_client", true},
		{"no credentials", webtest.FormType, webtest.Form("grant_type", "client_credentials"), "", 401, "invalid_client", false},
		{"no secret", webtest.FormType, webtest.Form("grant_type", "client_credentials", "client_id", ts.Full.ID), "", 401, "invalid_client", false},
		{"wrong secret", webtest.FormType, webtest.Form("grant_type", "client_credentials", "client_id", ts.Full.ID, "client_secret", "fcs_wrong"), "", 401, "invalid_client", false},
		{"wrong secret, basic", webtest.FormType, webtest.Form("grant_type", "client_credentials"), webtest.Basic(ts.Full.ID, "fcs_wrong"), 401, "invalid_client", true},
		{"malformed basic", webtest.FormType, webtest.Form("grant_type", "client_credentials"), "Basic !!!", 401, "invalid_client", true},
		{"another client's secret", webtest.FormType, webtest.Form("grant_type", "client_credentials", "client_id", ts.Reader.ID, "client_secret", ts.Full.Secret), "", 401, "invalid_client", false},
		{"unknown client", webtest.FormType, webtest.Form("grant_type", "client_credentials", "client_id", "fc_nobody", "client_secret", ts.Full.Secret), "", 401, "invalid_client", false},
		{"revoked client", webtest.FormType, webtest.Form("grant_type", "client_credentials", "client_id", revoked.ID, "client_secret", revoked.Secret), "", 401, "invalid_client", false},
		{"unknown scope", webtest.FormType, post("grant_type", "client_credentials", "scope", "admin"), "", 400, "invalid_scope", false},
		{"scope the client lacks", webtest.FormType, webtest.Form("grant_type", "client_credentials", "scope", "flows:write"), webtest.Basic(ts.Reader.ID, ts.Reader.Secret), 400, "invalid_scope", false},
		{"refresh without refresh_token", webtest.FormType, post("grant_type", "refresh_token"), "", 400, "invalid_request", false},
		{"unknown refresh token", webtest.FormType, post("grant_type", "refresh_token", "refresh_token", "frt_nothing"), "", 400, "invalid_grant", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := webtest.PostToken(t, tokenURL, tt.contentType, tt.body, tt.auth)
			if resp.StatusCode != tt.status || body["error"] != tt.code {
				t.Fatalf("%d %v, want %d %s", resp.StatusCode, body, tt.status, tt.code)
			}
			if d, _ := body["error_description"].(string); d == "" {
				t.Fatalf("no error_description: %v", body)
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("Cache-Control %q", resp.Header.Get("Cache-Control"))
			}
			if got := strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic"); got != tt.basicChallenge {
				t.Fatalf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

func TestRefreshGrant(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	tokenURL := ts.URL + "/oauth/token"
	auth := webtest.Basic(ts.Full.ID, ts.Full.Secret)
	_, first := webtest.PostToken(t, tokenURL, webtest.FormType, webtest.Form("grant_type", "client_credentials", "scope", "flows:read flows:write"), auth)
	rt, _ := first["refresh_token"].(string)

	resp, body := webtest.PostToken(t, tokenURL, webtest.FormType, webtest.Form("grant_type", "refresh_token", "refresh_token", rt), webtest.Basic(ts.Reader.ID, ts.Reader.Secret))
	if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("another client's refresh token: %d %v", resp.StatusCode, body)
	}
	// That leak revoked the family; start another.
	_, first = webtest.PostToken(t, tokenURL, webtest.FormType, webtest.Form("grant_type", "client_credentials", "scope", "flows:read flows:write"), auth)
	rt, _ = first["refresh_token"].(string)
	resp, body = webtest.PostToken(t, tokenURL, webtest.FormType, webtest.Form("grant_type", "refresh_token", "refresh_token", rt, "scope", "flows:delete"), auth)
	if resp.StatusCode != 400 || body["error"] != "invalid_scope" {
		t.Fatalf("widening the scope: %d %v", resp.StatusCode, body)
	}
	resp, second := webtest.PostToken(t, tokenURL, webtest.FormType, webtest.Form("grant_type", "refresh_token", "refresh_token", rt, "scope", "flows:read"), auth)
	if resp.StatusCode != 200 || second["scope"] != "flows:read" || second["refresh_token"] == rt || second["expires_in"] != 300.0 ||
		resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("refresh: %d %v", resp.StatusCode, second)
	}
	resp, body = webtest.PostToken(t, tokenURL, webtest.FormType, webtest.Form("grant_type", "refresh_token", "refresh_token", rt), auth)
	if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("reused refresh token: %d %v", resp.StatusCode, body)
	}
	resp, body = webtest.PostToken(t, tokenURL, webtest.FormType, webtest.Form("grant_type", "refresh_token", "refresh_token", second["refresh_token"].(string)), auth)
	if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("successor after reuse: %d %v", resp.StatusCode, body)
	}
}

// TestStandardClientUsesTheAPI runs golang.org/x/oauth2's client-credentials
// client, in both authentication styles, against the token endpoint and then
// an authenticated route.
func TestStandardClientUsesTheAPI(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
		cc := clientcredentials.Config{ClientID: ts.Full.ID, ClientSecret: ts.Full.Secret, TokenURL: ts.URL + "/oauth/token", AuthStyle: style}
		resp, err := cc.Client(context.Background()).Get(ts.URL + "/api/test-principal")
		if err != nil {
			t.Fatal(err)
		}
		var p identity.Principal
		_ = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != 200 || p.OrganizationID != ts.Org.ID || p.ClientID != ts.Full.ID || len(p.Scopes) != len(identity.AllScopes) || p.Sandbox {
			t.Fatalf("style %v: %d %+v", style, resp.StatusCode, p)
		}
	}

	// The read-only client is authenticated but lacks flows:write.
	cc := clientcredentials.Config{ClientID: ts.Reader.ID, ClientSecret: ts.Reader.Secret, TokenURL: ts.URL + "/oauth/token"}
	resp, err := cc.Client(context.Background()).Get(ts.URL + "/api/test-principal")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `scope="flows:write"`) || !strings.Contains(string(b), "flows:write") {
		t.Fatalf("read-only client: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
	}
}

// TestDiscoveryAndJWKSServeStandardVerifiers has go-oidc discover the
// built-in provider and verify one of its tokens, as another service would.
func TestDiscoveryAndJWKSServeStandardVerifiers(t *testing.T) {
	t.Parallel()
	ts := webtest.SetupOAuth(t, nil)
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		TokenEndpoint string   `json:"token_endpoint"`
		JWKSURI       string   `json:"jwks_uri"`
		Grants        []string `json:"grant_types_supported"`
		AuthMethods   []string `json:"token_endpoint_auth_methods_supported"`
		RevokeMethods []string `json:"revocation_endpoint_auth_methods_supported"`
		InspectAlgs   []string `json:"introspection_endpoint_auth_signing_alg_values_supported"`
		SigningAlgs   []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	}
	if err := provider.Claims(&meta); err != nil || meta.TokenEndpoint != ts.URL+"/oauth/token" || meta.JWKSURI != ts.URL+"/oauth/jwks" ||
		strings.Join(meta.Grants, " ") != "client_credentials refresh_token authorization_code" || strings.Join(meta.AuthMethods, " ") != "client_secret_basic client_secret_post private_key_jwt" ||
		strings.Join(meta.RevokeMethods, " ") != "client_secret_basic client_secret_post private_key_jwt" ||
		strings.Join(meta.SigningAlgs, " ") != "RS256 PS256 ES256" || strings.Join(meta.InspectAlgs, " ") != "RS256 PS256 ES256" {
		t.Fatalf("discovery %+v %v", meta, err)
	}
	cc := clientcredentials.Config{ClientID: ts.Full.ID, ClientSecret: ts.Full.Secret, TokenURL: meta.TokenEndpoint}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idt, err := provider.Verifier(&oidc.Config{ClientID: "flowd"}).Verify(ctx, tok.AccessToken)
	if err != nil || idt.Subject != ts.Full.ID {
		t.Fatalf("go-oidc verifying a flowd token through discovery and JWKS: %v", err)
	}
	resp, err := http.Get(meta.JWKSURI)
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&set)
	resp.Body.Close()
	if len(set.Keys) != 1 || set.Keys[0]["d"] != nil || set.Keys[0]["kid"] == "" || set.Keys[0]["alg"] != "ES256" {
		t.Fatalf("JWKS %v", set)
	}
}

// TestDiscoveryListsWhatTheProviderDoes reads both metadata documents of a
// server with the API's token endpoint and the interactive login: each lists
// the scopes and claims of both once, both ID token algorithms, and the
// authorization endpoint's features that OpenID Discovery and RFC 9207 name.
func TestDiscoveryListsWhatTheProviderDoes(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	lists := map[string][]string{
		"scopes_supported": append(slices.Clone(identity.AllScopes), "openid", "profile"),
		// Claims of access tokens, then of ID tokens.
		"claims_supported": {"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "client_id", "scope", "org_id",
			"auth_time", "nonce", "acr", "azp", "preferred_username", "name", "sid", "roles", "pid"},
		"id_token_signing_alg_values_supported": {"RS256", "ES256"},
		// The test eID's levels, as FLOWD_CONSENT_ACR_MAP names them.
		"acr_values_supported":     {"http://eidas.europa.eu/LoA/low", "http://eidas.europa.eu/LoA/substantial", "http://eidas.europa.eu/LoA/high"},
		"grant_types_supported":    {"authorization_code", "client_credentials", "refresh_token"},
		"response_types_supported": {"code"},
	}
	for _, path := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"} {
		t.Run(path, func(t *testing.T) {
			resp, err := http.Get(ls.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var doc map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %v", resp.StatusCode, err)
			}
			for field, want := range lists {
				var got []string
				raw, _ := json.Marshal(doc[field])
				_ = json.Unmarshal(raw, &got)
				for _, w := range want {
					if !slices.Contains(got, w) {
						t.Errorf("%s lacks %s: %v", field, w, got)
					}
				}
				if len(slices.Compact(slices.Sorted(slices.Values(got)))) != len(got) {
					t.Errorf("%s lists a value twice: %v", field, got)
				}
			}
			if got := doc["response_types_supported"]; len(got.([]any)) != 1 {
				t.Errorf("response_types_supported = %v, want only code", got)
			}
			// Absent, request_uri_parameter_supported would mean true (OpenID Discovery 3).
			for field, want := range map[string]any{"issuer": ls.URL, "request_uri_parameter_supported": false,
				"request_parameter_supported": false, "authorization_response_iss_parameter_supported": true} {
				if got, ok := doc[field]; !ok || got != want {
					t.Errorf("%s = %v (present %v), want %v", field, got, ok, want)
				}
			}
		})
	}
}

// FuzzTokenRequest feeds the token endpoint's parser arbitrary bodies,
// content types and Authorization headers: it must never panic, and what it
// accepts must be one consistent request.
func FuzzTokenRequest(f *testing.F) {
	seeds := []struct{ contentType, body, auth string }{
		{webtest.FormType, "grant_type=client_credentials&client_id=fc_a&client_secret=fcs_b", ""},
		{webtest.FormType, "grant_type=client_credentials", webtest.Basic("fc_a", "fcs_b")},
		{webtest.FormType + "; charset=utf-8", "grant_type=refresh_token&refresh_token=frt_x&scope=flows%3Aread", webtest.Basic("fc a", "s:e%cret")},
		{webtest.FormType, "grant_type=client_credentials&grant_type=x", ""},
		{webtest.FormType, "%zz=1", ""},
		{webtest.FormType, "client_secret=a", "Basic Zm9vOmJhcg=="},
		{webtest.FormType, "a=%00", "Basic !!"},
		{webtest.FormType, "scope=\xff", "Basic " + base64.StdEncoding.EncodeToString([]byte("%zz:x"))},
		{"application/json", "{}", ""},
		{"", "", "Bearer x"},
		{"multipart/form-data; boundary=x", "--x--", ""},
	}
	for _, s := range seeds {
		f.Add(s.contentType, s.body, s.auth)
	}
	f.Fuzz(func(t *testing.T, contentType, body, auth string) {
		req := httptest.NewRequest(http.MethodPost, "/oauth/token", strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		got, _, terr := oauth.ParseTokenRequest(req)
		if terr != nil {
			if terr.Code == "" || terr.Description == "" {
				t.Fatalf("error without code or description: %+v", terr)
			}
			if got != (tokens.TokenRequest{}) {
				t.Fatalf("a refused request still carries values: %+v", got)
			}
			return
		}
		if got.AuthMethod != identity.AuthSecretPost && got.AuthMethod != identity.AuthSecretBasic {
			t.Fatalf("no authentication method: %+v", got)
		}
		if got.AuthMethod == identity.AuthSecretBasic && (auth == "" || got.ClientID == "") {
			t.Fatalf("basic without a header or client id: %+v", got)
		}
		if auth != "" && got.AuthMethod != identity.AuthSecretBasic {
			t.Fatalf("an Authorization header was ignored: %+v", got)
		}
		values, err := url.ParseQuery(body)
		if err != nil {
			t.Fatalf("accepted a body url.ParseQuery refuses: %q", body)
		}
		if g := values.Get("grant_type"); g != got.GrantType {
			t.Fatalf("grant_type %q, parsed %q", g, got.GrantType)
		}
	})
}
