package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/cmd/flowd/internal/app"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

func TestIdentityCommandsAndTokensEndToEnd(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	ctx := context.Background()

	org := in.CLIJSON(t, "orgs", "create", "--name", "Acme Lending", "--org-number", "998877665")
	if keys(org) != "id,name,referencePrefix,webhookSecret" || org["name"] != "Acme Lending" || org["referencePrefix"] != "AL" ||
		!strings.HasPrefix(org["webhookSecret"].(string), "whsec_") {
		t.Fatalf("orgs create: %v", org)
	}
	orgID := org["id"].(string)
	if _, err := flowdtest.RunCLI(in.Getenv, "", "orgs", "create", "--name", "", "--json"); err == nil || !strings.Contains(err.Error(), "name") {
		t.Fatalf("orgs create without a name: %v", err)
	}
	if list := in.CLIJSON(t, "orgs", "list"); !strings.Contains(mustJSON(list), orgID) {
		t.Fatalf("orgs list: %v", list)
	}

	client := in.CLIJSON(t, "clients", "create", "--org", orgID, "--scopes", "flows:read flows:write", "--sandbox")
	if keys(client) != "authMethods,clientId,clientSecret,dpopBound,sandbox,scopes" || client["sandbox"] != true || client["dpopBound"] != false || mustJSON(client["scopes"]) != `["flows:read","flows:write"]` {
		t.Fatalf("clients create: %v", client)
	}
	id, sec := client["clientId"].(string), client["clientSecret"].(string)
	// Given the key encryption key, the command stores the secret's MAC, so
	// that the client's first token request is already cheap to check.
	if hasMAC := queryBool(t, in.DatabaseURL, `select secret_mac is not null from api_clients where id = $1`, id); !hasMAC {
		t.Fatal("clients create with FLOWD_KEY_ENCRYPTION_KEY set stored no MAC of the secret")
	}
	if _, err := flowdtest.RunCLI(in.Getenv, "", "clients", "create", "--org", orgID, "--scopes", "flows:admin"); err == nil {
		t.Fatal("clients create accepted an unknown scope")
	}
	if _, err := flowdtest.RunCLI(in.Getenv, "", "clients", "create", "--org", "00000000-0000-0000-0000-000000000000"); err == nil {
		t.Fatal("clients create accepted an unknown organization")
	}

	cc := clientcredentials.Config{ClientID: id, ClientSecret: sec, TokenURL: in.URL + "/oauth/token"}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok.TokenType != "Bearer" || tok.RefreshToken == "" || tok.Extra("scope") != "flows:read flows:write" {
		t.Fatalf("token %+v", tok)
	}
	// Authenticated: past the 401 to the missing route.
	if s := flowdtest.BearerStatus(t, in.URL+flowdtest.NoSuchFlow, tok.AccessToken); s != 404 {
		t.Fatalf("API with a valid token: %d", s)
	}
	if list := in.CLIJSON(t, "clients", "list", "--org", orgID); !strings.Contains(mustJSON(list), id) || !strings.Contains(mustJSON(list), "lastUsedAt") {
		t.Fatalf("clients list: %v", list)
	}

	// Key rotation: a new token key of each algorithm and a new receipt key;
	// the old keys stay published and their tokens (and receipts) keep working.
	type jwk struct {
		Kid string `json:"kid"`
		Alg string `json:"alg"`
	}
	jwks := func() []jwk {
		var set struct {
			Keys []jwk `json:"keys"`
		}
		resp, err := http.Get(in.URL + "/oauth/jwks")
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(&set)
		resp.Body.Close()
		return set.Keys
	}
	before := jwks()
	var rotated struct {
		Keys []struct{ KeyID, Algorithm, Use string } `json:"keys"`
	}
	_ = json.Unmarshal([]byte(mustJSON(in.CLIJSON(t, "keys", "rotate"))), &rotated)
	after := jwks()
	if len(before) != 3 || len(rotated.Keys) != 3 || len(after) != 6 || rotated.Keys[2].Use != "receipts" ||
		!strings.HasPrefix(rotated.Keys[2].KeyID, "receipt-") {
		t.Fatalf("JWKS %+v, then keys rotate %+v, then JWKS %+v", before, rotated, after)
	}
	for _, k := range append(before, jwk{rotated.Keys[0].KeyID, rotated.Keys[0].Algorithm}, jwk{rotated.Keys[1].KeyID, rotated.Keys[1].Algorithm},
		jwk{rotated.Keys[2].KeyID, rotated.Keys[2].Algorithm}) {
		if !slices.Contains(after, k) {
			t.Fatalf("JWKS after rotation %+v lacks %+v", after, k)
		}
	}
	if s := flowdtest.BearerStatus(t, in.URL+flowdtest.NoSuchFlow, tok.AccessToken); s != 404 {
		t.Fatalf("token of the previous key after rotation: %d", s)
	}

	// Secret rotation: the old secret stops, the new one works.
	again := in.CLIJSON(t, "clients", "rotate", id)
	if again["clientId"] != id || again["clientSecret"] == sec {
		t.Fatalf("clients rotate: %v", again)
	}
	if _, err := cc.Token(ctx); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("old secret after rotation: %v", err)
	}
	cc.ClientSecret = again["clientSecret"].(string)
	tok, err = cc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Revocation: the token the server has already seen stops working.
	if s := flowdtest.BearerStatus(t, in.URL+flowdtest.NoSuchFlow, tok.AccessToken); s != 404 {
		t.Fatalf("fresh token: %d", s)
	}
	in.CLI(t, "", "clients", "revoke", "--client-id", id)
	testwait.For(t, "a revoked client's token to be refused", func() (bool, string) {
		s := flowdtest.BearerStatus(t, in.URL+flowdtest.NoSuchFlow, tok.AccessToken)
		return s == 401, fmt.Sprintf("a revoked client's token answered %d", s)
	})
	if _, err := cc.Token(ctx); err == nil {
		t.Fatal("a revoked client obtained a token")
	}

	mapped := in.CLIJSON(t, "clients", "map", "--org", orgID, "--issuer", "https://idp.example.com/", "--client-id", "dex-app")
	if mapped["clientId"] != "dex-app" || mapped["issuer"] != "https://idp.example.com" || mapped["organizationId"] != orgID {
		t.Fatalf("clients map: %v", mapped)
	}
}

func TestDemoSeedsOnceAndAgainAfterAReset(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	state := filepath.Join(t.TempDir(), "demo.json")
	// demo runs flowd demo and returns what it printed, and what it said on
	// stderr of what it does.
	demo := func(in *flowdtest.Instance) (printed, progress string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := app.Run(context.Background(), []string{"demo", "--state", state}, in.Getenv, strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Fatalf("flowd demo: %v (stderr: %s)", err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	first, progress := demo(in)
	for _, step := range []string{`creating the organization "Demo Bank"`, "creating its API client", "creating its staff admin admin@demo.bank"} {
		if !strings.Contains(progress, "demo: "+step+"\n") {
			t.Errorf("the first demo did not say it was %s:\n%s", step, progress)
		}
	}
	second, progress := demo(in)
	if strings.Contains(progress, "creating") {
		t.Errorf("the second demo, which creates nothing, said:\n%s", progress)
	}
	var st struct {
		OrganizationID, ClientID, ClientSecret string
	}
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(b, &st)
	if fi, _ := os.Stat(state); fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v", fi.Mode())
	}
	for _, out := range []string{first, second} {
		for _, want := range []string{"Demo Bank", st.OrganizationID, st.ClientID, st.ClientSecret, in.URL + "/oauth/token", "curl ",
			"webhook secret whsec_"} {
			if want == "" || !strings.Contains(out, want) {
				t.Fatalf("demo output lacks %q:\n%s", want, out)
			}
		}
	}
	// The secret printed is the one that signs: rotating it changes what
	// the demo prints.
	rotated, err := flowdtest.RunCLI(in.Getenv, "", "orgs", "rotate-webhook-secret", "--org", st.OrganizationID, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var secret struct{ WebhookSecret string }
	if err := json.Unmarshal([]byte(rotated), &secret); err != nil || secret.WebhookSecret == "" {
		t.Fatalf("rotate-webhook-secret --json: %q %v", rotated, err)
	}
	if third, _ := demo(in); !strings.Contains(third, "webhook secret "+secret.WebhookSecret+"\n") {
		t.Fatalf("after a rotation the demo does not print the new secret %s:\n%s", secret.WebhookSecret, third)
	}
	cc := clientcredentials.Config{ClientID: st.ClientID, ClientSecret: st.ClientSecret, TokenURL: in.URL + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}
	if _, err := cc.Token(context.Background()); err != nil {
		t.Fatalf("the demo client cannot get a token: %v", err)
	}

	// A reset database (another instance on a fresh one) is seeded again.
	fresh := flowdtest.Start(t)
	out, _ := demo(fresh)
	b, _ = os.ReadFile(state)
	var st2 struct{ OrganizationID, ClientID string }
	_ = json.Unmarshal(b, &st2)
	if st2.OrganizationID == st.OrganizationID || st2.ClientID == st.ClientID || !strings.Contains(out, st2.ClientID) {
		t.Fatalf("demo after a reset kept stale ids:\n%s", out)
	}
}

func TestServeRefusesAKeyEncryptionKeyThatCannotOpenTheSigningKey(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	env := map[string]string{}
	for k, v := range in.Env {
		env[k] = v
	}
	env["FLOWD_ADDR"] = "127.0.0.1:0"
	env["FLOWD_KEY_ENCRYPTION_KEY"] = "b3RoZXIta2V5LWVuY3J5cHRpb24ta2V5LWZvci10ZXM="
	_, err := flowdtest.RunCLI(func(k string) string { return env[k] }, "", "serve")
	if err == nil || !strings.Contains(err.Error(), "FLOWD_KEY_ENCRYPTION_KEY") || !strings.Contains(err.Error(), "keys rotate") {
		t.Fatalf("serve with another key-encryption key: %v", err)
	}
	if out, err := flowdtest.RunCLI(func(k string) string { return env[k] }, "", "keys", "rotate"); err != nil || !strings.Contains(out, "New signing key") {
		t.Fatalf("keys rotate under the new key-encryption key: %q %v", out, err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// queryBool answers a one-row, one-column boolean query on the database at url.
func queryBool(t *testing.T, url, sql string, args ...any) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v bool
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}
