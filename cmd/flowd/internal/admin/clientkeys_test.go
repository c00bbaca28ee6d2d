package admin_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testkeys"
)

// TestClientKeysCommands registers a private_key_jwt client from a JWKS
// file, obtains a token with an assertion, replaces its keys from stdin,
// and checks what the commands refuse.
func TestClientKeysCommands(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)
	orgID := in.CLIJSON(t, "orgs", "create", "--name", "Key Bank")["id"].(string)
	first, second := testkeys.EC(t), testkeys.EC(t)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, testkeys.PublicJWKS(t, "one", first), 0o600); err != nil {
		t.Fatal(err)
	}

	client := in.CLIJSON(t, "clients", "create", "--org", orgID, "--jwks", file)
	if keys(client) != "authMethods,clientId,dpopBound,sandbox,scopes" || mustJSON(client["authMethods"]) != `["private_key_jwt"]` {
		t.Fatalf("clients create --jwks: %v", client)
	}
	id := client["clientId"].(string)
	var scopeList []string
	for _, sc := range client["scopes"].([]any) {
		scopeList = append(scopeList, sc.(string))
	}
	scopes := strings.Join(scopeList, " ")
	if status := assertionToken(t, in, id, first, "one"); status != http.StatusOK {
		t.Fatalf("a token with the registered key: %d", status)
	}
	both := in.CLIJSON(t, "clients", "create", "--org", orgID, "--jwks", file, "--secret")
	if mustJSON(both["authMethods"]) != `["client_secret_basic","client_secret_post","private_key_jwt"]` || both["clientSecret"] == nil {
		t.Fatalf("clients create --jwks --secret: %v", both)
	}

	// Replacing the keys: the old key stops, the new one works.
	if out, err := flowdtest.RunCLI(in.Getenv, string(testkeys.PublicJWKS(t, "two", second)), "clients", "keys", id, "--jwks", "-"); err != nil ||
		!strings.Contains(out, "Replaced the keys") {
		t.Fatalf("clients keys: %q %v", out, err)
	}
	if status := assertionToken(t, in, id, first, "one"); status != http.StatusUnauthorized {
		t.Fatalf("the replaced key: %d", status)
	}
	if status := assertionToken(t, in, id, second, "two"); status != http.StatusOK {
		t.Fatalf("the new key: %d", status)
	}
	list := mustJSON(in.CLIJSON(t, "clients", "list", "--org", orgID))
	if !strings.Contains(list, `"authMethods":["private_key_jwt"]`) {
		t.Fatalf("clients list: %s", list)
	}

	wantAudit := []string{
		"client.create " + id + ": API client; scopes " + scopes + "; auth private_key_jwt (keys given inline)",
		"client.create " + both["clientId"].(string) + ": API client; scopes " + scopes + "; auth client_secret_basic client_secret_post private_key_jwt (keys given inline)",
		"client.replace_keys " + id + ": API client; auth private_key_jwt (keys given inline)",
	}
	if got := operatorAudit(t, in); !slices.Equal(got, wantAudit) {
		t.Fatalf("the operator's audit entries:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantAudit, "\n"))
	}

	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"clients", "create", "--org", orgID, "--jwks-uri", "https://keys.bank.example/jwks"}, "", "--jwksUri no jwks_uri host is allowed"},
		{[]string{"clients", "create", "--org", orgID, "--jwks-uri", "http://keys.bank.example/jwks"}, "", "--jwksUri must be an https URL"},
		{[]string{"clients", "create", "--org", orgID, "--jwks", "-"}, `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, `private member "k"`},
		{[]string{"clients", "create", "--org", orgID, "--secret"}, "", "--secret goes with --jwks"},
		{[]string{"clients", "keys", id}, "", "give the new keys"},
		{[]string{"clients", "rotate", id}, "", "has no secret"},
	} {
		if out, err := flowdtest.RunCLI(in.Getenv, tc.stdin, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("flowd %s: %q %v, want an error with %q", strings.Join(tc.args, " "), out, err, tc.want)
		}
	}
	if got := operatorAudit(t, in); len(got) != len(wantAudit) {
		t.Fatalf("refused commands were audited: %q", got[len(wantAudit):])
	}
}

// operatorAudit lists the audit entries the CLI made, oldest first, as
// "action target: detail".
func operatorAudit(t *testing.T, in *flowdtest.Instance) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), in.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(),
		"select action || ' ' || target || ': ' || detail from audit_log where actor = 'operator:cli' order by id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// assertionToken asks in's token endpoint for a token with an assertion
// signed by k and returns the status.
func assertionToken(t *testing.T, in *flowdtest.Instance, clientID string, k *ecdsa.PrivateKey, kid string) int {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": clientID, "sub": clientID, "aud": in.URL + "/oauth/token",
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": now.Format(time.RFC3339Nano)})
	jws, err := signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	assertion, _ := jws.CompactSerialize()
	resp, err := http.PostForm(in.URL+"/oauth/token", url.Values{"grant_type": {"client_credentials"},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {assertion}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
