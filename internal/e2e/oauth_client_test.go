package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testkeys"
)

// clientLibraryDir holds the independent client (oauth4webapi) and its
// locked dependencies; `make test` installs them with npm ci.
const clientLibraryDir = "testdata/oauth4webapi"

// clientReport is what client.mjs observed.
type clientReport struct {
	Discovery struct {
		TokenAuthMethods []string `json:"tokenAuthMethods"`
		TokenAuthAlgs    []string `json:"tokenAuthAlgs"`
		DPoPAlgs         []string `json:"dpopAlgs"`
		Revocation       string   `json:"revocation"`
		Introspection    string   `json:"introspection"`
	} `json:"discovery"`
	Bearer       clientCall    `json:"bearer"`
	WithoutProof clientRefusal `json:"withoutProof"`
	DPoP         clientCall    `json:"dpop"`
	Thumbprint   string        `json:"dpopKeyThumbprint"`
	NonceRetries int           `json:"nonceRetries"`

	ReplayedProof      rawCall `json:"replayedProof"`
	AsBearer           rawCall `json:"asBearer"`
	SchemeWithoutProof rawCall `json:"schemeWithoutProof"`

	Refreshed     clientCall `json:"refreshed"`
	Introspection struct {
		Active    bool   `json:"active"`
		TokenType string `json:"tokenType"`
		JKT       string `json:"jkt"`
		ClientID  string `json:"clientId"`
	} `json:"introspection"`
	AfterRevocation              clientRefusal `json:"afterRevocation"`
	IntrospectionAfterRevocation struct {
		Active bool `json:"active"`
	} `json:"introspectionAfterRevocation"`
	RefreshAfterRevocation clientRefusal `json:"refreshAfterRevocation"`
}

type clientCall struct {
	TokenType string `json:"tokenType"`
	APIStatus int    `json:"apiStatus"`
}

type clientRefusal struct {
	Error      string `json:"error"`
	Status     int    `json:"status"`
	Challenges []struct {
		Scheme string `json:"scheme"`
		Error  string `json:"error"`
	} `json:"challenges"`
}

type rawCall struct {
	Status          int    `json:"status"`
	WWWAuthenticate string `json:"wwwAuthenticate"`
}

// TestAnIndependentClientLibrary runs an integration written with
// oauth4webapi against the real flowd: private_key_jwt for every
// authenticated endpoint, DPoP-bound tokens (with the server nonce
// required, so the client must follow it), revocation and introspection.
func TestAnIndependentClientLibrary(t *testing.T) {
	t.Parallel()
	node := nodeWithClientLibrary(t)
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_DPOP_NONCE", "required"))
	var o org
	if err := json.Unmarshal([]byte(in.CLI(t, "", "orgs", "create", "--name", "Key Bank", "--prefix", "KEY", "--json")), &o); err != nil {
		t.Fatal(err)
	}
	private, public := clientKeyPair(t)
	keyClient := createKeyClient(t, in, o.ID, public)
	dpopClient := createKeyClient(t, in, o.ID, public, "--dpop")

	input, _ := json.Marshal(map[string]any{
		"issuer": in.URL, "keyClientId": keyClient, "dpopClientId": dpopClient, "clientKey": private,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = clientLibraryDir
	cmd.Env = append(os.Environ(), "FLOWD_CLIENT_TEST="+string(input))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client.mjs: %v\n%s", err, stderr.String())
	}
	var got clientReport
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("client.mjs printed %q: %v", stdout.String(), err)
	}

	dpopChallenge := func(c rawCall, wantError string) bool {
		return c.Status == 401 && strings.HasPrefix(c.WWWAuthenticate, "DPoP ") && strings.Contains(c.WWWAuthenticate, `error="`+wantError+`"`)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"discovery offers private_key_jwt with ES256", slices.Contains(got.Discovery.TokenAuthMethods, "private_key_jwt") && slices.Contains(got.Discovery.TokenAuthAlgs, "ES256")},
		{"discovery offers DPoP with ES256", slices.Contains(got.Discovery.DPoPAlgs, "ES256")},
		{"discovery names revocation and introspection", got.Discovery.Revocation == in.URL+"/oauth/revoke" && got.Discovery.Introspection == in.URL+"/oauth/introspect"},
		{"a private_key_jwt client gets a bearer token the API accepts", got.Bearer.TokenType == "bearer" && got.Bearer.APIStatus == 200},
		{"a client required to use DPoP gets no token without a proof", got.WithoutProof.Error == "invalid_dpop_proof" && got.WithoutProof.Status == 400},
		{"the client had to follow the server's nonce", got.NonceRetries >= 1},
		{"with a proof it gets a DPoP token the API accepts with proofs", got.DPoP.TokenType == "dpop" && got.DPoP.APIStatus == 200},
		{"a replayed proof is refused", dpopChallenge(got.ReplayedProof, "invalid_dpop_proof")},
		{"the bound token sent as a bearer token is refused", got.AsBearer.Status == 401 && strings.Contains(got.AsBearer.WWWAuthenticate, `error="invalid_token"`)},
		{"the bound token without a proof is refused", got.SchemeWithoutProof.Status == 401 && strings.Contains(got.SchemeWithoutProof.WWWAuthenticate, "DPoP ")},
		{"refreshing keeps the binding", got.Refreshed.TokenType == "dpop"},
		{"introspection shows the key the client holds", got.Introspection.Active && got.Introspection.TokenType == "DPoP" &&
			got.Introspection.JKT == got.Thumbprint && got.Thumbprint != "" && got.Introspection.ClientID == dpopClient},
		{"the API refuses a revoked token", got.AfterRevocation.Status == 401 && len(got.AfterRevocation.Challenges) == 1 &&
			got.AfterRevocation.Challenges[0].Scheme == "dpop" && got.AfterRevocation.Challenges[0].Error == "invalid_token"},
		{"introspection calls a revoked token inactive", !got.IntrospectionAfterRevocation.Active},
		{"a revoked refresh token is refused", got.RefreshAfterRevocation.Error == "invalid_grant"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: no", c.what)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("client.mjs observed: %s", stdout.String())
	}
}

// nodeWithClientLibrary finds node and the installed client library.
func nodeWithClientLibrary(t *testing.T) string {
	t.Helper()
	node := os.Getenv("FLOWD_NODE")
	if node == "" {
		var err error
		if node, err = exec.LookPath("node"); err != nil {
			t.Fatal("node not found: `make test` installs it with apt-get (apt-get install nodejs npm), or set FLOWD_NODE")
		}
	}
	if _, err := os.Stat(filepath.Join(clientLibraryDir, "node_modules", "oauth4webapi")); err != nil {
		t.Fatalf("oauth4webapi is not installed: `make test` installs it (npm ci --prefix internal/e2e/%s)", clientLibraryDir)
	}
	return node
}

// clientKeyPair makes a client's ES256 key: the private JWK for the client
// library and the public JWKS to register.
func clientKeyPair(t *testing.T) (private, public json.RawMessage) {
	t.Helper()
	const kid = "e2e-1"
	key := testkeys.EC(t)
	private, err := jose.JSONWebKey{Key: key, KeyID: kid}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return private, testkeys.PublicJWKS(t, kid, key)
}

// createKeyClient registers an assertion-only client with the public JWKS
// through the CLI and returns its id.
func createKeyClient(t *testing.T, in *flowdtest.Instance, orgID string, jwks json.RawMessage, flags ...string) string {
	t.Helper()
	args := append([]string{"clients", "create", "--org", orgID, "--jwks", "-", "--json"}, flags...)
	var c client
	if err := json.Unmarshal([]byte(in.CLI(t, string(jwks), args...)), &c); err != nil {
		t.Fatal(err)
	}
	if c.ClientID == "" || c.ClientSecret != "" {
		t.Fatalf("clients create --jwks gave %+v; want an id and no secret", c)
	}
	return c.ClientID
}
