package admin_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
)

// TestClientDPoPCommand makes a client required to use DPoP with
// `clients create --dpop`, turns the requirement off and on again with
// `clients dpop`, and checks what the token endpoint of a server started
// with FLOWD_DPOP_NONCE=required answers meanwhile, and the audit log.
func TestClientDPoPCommand(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_DPOP_NONCE", "required"))
	orgID := in.CLIJSON(t, "orgs", "create", "--name", "DPoP Bank")["id"].(string)
	client := in.CLIJSON(t, "clients", "create", "--org", orgID, "--dpop")
	id, sec := client["clientId"].(string), client["clientSecret"].(string)
	if list := mustJSON(in.CLIJSON(t, "clients", "list", "--org", orgID)); !strings.Contains(list, `"dpopBound":true`) {
		t.Fatalf("clients list: %s", list)
	}

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	// token posts a client_credentials request, with a proof unless nonce is "-".
	token := func(nonce string) (int, map[string]any, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, in.URL+"/oauth/token", strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(id, sec)
		if nonce != "-" {
			claims, _ := json.Marshal(map[string]any{"jti": rand.Text(), "htm": "POST", "htu": in.URL + "/oauth/token", "iat": time.Now().Unix(), "nonce": nonce})
			jws, err := signer.Sign(claims)
			if err != nil {
				t.Fatal(err)
			}
			proof, _ := jws.CompactSerialize()
			req.Header.Set("DPoP", proof)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m, resp.Header
	}
	if status, m, _ := token("-"); status != 400 || m["error"] != "invalid_dpop_proof" {
		t.Fatalf("no proof: %d %v", status, m)
	}
	status, m, h := token("")
	if status != 400 || m["error"] != "use_dpop_nonce" || h.Get("DPoP-Nonce") == "" {
		t.Fatalf("no nonce: %d %v %v", status, m, h)
	}
	if status, m, _ := token(h.Get("DPoP-Nonce")); status != 200 || m["token_type"] != "DPoP" {
		t.Fatalf("with the nonce: %d %v", status, m)
	}

	if off := in.CLIJSON(t, "clients", "dpop", id, "off"); off["dpopBound"] != false {
		t.Fatalf("clients dpop off: %v", off)
	}
	if status, m, _ := token("-"); status != 200 || m["token_type"] != "Bearer" {
		t.Fatalf("no proof, DPoP not required: %d %v", status, m)
	}
	if out := in.CLI(t, "", "clients", "dpop", id, "on"); !strings.Contains(out, "must now send DPoP proofs") {
		t.Fatalf("clients dpop on: %q", out)
	}
	for _, args := range [][]string{{"clients", "dpop", id}, {"clients", "dpop", id, "yes"}, {"clients", "dpop", "fc_nosuchclient", "on"}} {
		if _, err := flowdtest.RunCLI(in.Getenv, "", args...); err == nil {
			t.Fatalf("flowd %s succeeded", strings.Join(args, " "))
		}
	}

	conn, err := pgx.Connect(context.Background(), in.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "select count(*) from audit_log where action = 'client.dpop' and target = $1 and actor = 'operator:cli'", id).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d client.dpop audit entries (%v), want 2", n, err)
	}
}
