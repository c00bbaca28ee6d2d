package webtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/secrethash"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/modules/identity"
	"github.com/flowd/flowd/modules/identity/identitytest"
	"github.com/flowd/flowd/modules/identity/orgs"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/web/internal/httpkit"
)

// OAuthServer is the real server with the real identity module on a fresh
// database, an organization, and two clients: one with every scope, one
// that may only read.
type OAuthServer struct {
	URL      string
	Pool     *pgxpool.Pool
	Cfg      identitytest.Config
	Identity *identitytest.Identity
	Org      orgs.Organization
	Full     orgs.ClientCredentials
	Reader   orgs.ClientCredentials
}

// SetupOAuth starts an OAuthServer, its identity module configured by change.
func SetupOAuth(t *testing.T, change func(*identitytest.Config)) OAuthServer {
	t.Helper()
	return SetupOAuthWith(t, nil, change)
}

// SetupOAuthWith is SetupOAuth with more settings in env.
func SetupOAuthWith(t *testing.T, env map[string]string, change func(*identitytest.Config)) OAuthServer {
	t.Helper()
	pool, err := database.Open(context.Background(), dbtest.NewURL(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	hs := httptest.NewUnstartedServer(nil)
	base := "http://" + hs.Listener.Addr().String()
	cfg, err := config.Load(func(k string) string {
		if k == "FLOWD_BASE_URL" {
			return base
		}
		return env[k]
	}, config.Need{})
	if err != nil {
		t.Fatal(err)
	}
	icfg := identitytest.Config{
		Issuer: base, Audience: "flowd", KeyEncryptionKey: bytes.Repeat([]byte{7}, 32),
		HashParams: secrethash.Cheap,
	}
	if change != nil {
		change(&icfg)
	}
	id := identitytest.New(t, pool, icfg)
	srv := NewServer(t, web.Deps{Config: cfg, Pool: pool, Tokens: id})
	// A route behind authentication and a scope, as the API's routes are.
	srv.Echo().GET("/api/test-principal", func(c echo.Context) error {
		return httpkit.WriteJSON(c, http.StatusOK, httpkit.Principal(c))
	}, httpkit.Authenticate(id, id), httpkit.RequireScope(identity.ScopeFlowsWrite))
	hs.Config.Handler = srv
	hs.Start()
	t.Cleanup(hs.Close)

	ctx := context.Background()
	org, err := id.CreateOrganization(ctx, orgs.NewOrganization{Name: "Test Bank"})
	if err != nil {
		t.Fatal(err)
	}
	full, err := id.CreateClient(ctx, orgs.NewClient{OrganizationID: org.ID})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := id.CreateClient(ctx, orgs.NewClient{OrganizationID: org.ID, Scopes: []string{identity.ScopeFlowsRead}, Sandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	return OAuthServer{URL: base, Pool: pool, Cfg: icfg, Identity: id, Org: org, Full: full, Reader: reader}
}

// PostToken sends a token request with form values and an optional
// Authorization header.
func PostToken(t *testing.T, tokenURL, contentType, body, authorization string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, tokenURL, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	return SendTokenRequest(t, http.DefaultClient, req)
}

// SendTokenRequest sends a request to the token endpoint with hc and returns the
// response and its JSON body.
func SendTokenRequest(t *testing.T, hc *http.Client, req *http.Request) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("token endpoint answered %d with non-JSON %q", resp.StatusCode, b)
	}
	return resp, m
}

// FormType is the media type of form bodies.
const FormType = "application/x-www-form-urlencoded"

// Basic is the HTTP Basic Authorization value of a client, form-encoded
// as RFC 6749 2.3.1 asks.
func Basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

// Form encodes name, value pairs as a form body.
func Form(kv ...string) string {
	v := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v.Encode()
}
