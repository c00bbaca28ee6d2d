package reliability_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
)

// TestReceiptsVerifyWithTheCLI: a receipt of a real decision checks out with
// `flowd receipts verify` against the deployment's keys, against the JWKS by
// URL and, offline, against a saved copy; a changed receipt does not.
func TestReceiptsVerifyWithTheCLI(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", nil)
	tn := newTenant(t, p.Env, "Receipt Bank", "RCPT")
	tok := tn.token(t, p.URL)
	a := mustDo(t, "POST", p.URL+"/api/flows", tok, createBody("12345678901", "Nordmann", ""))
	var created struct {
		FlowID string `json:"flowId"`
		Links  struct {
			Consent struct{ Href string } `json:"consent"`
		} `json:"_links"`
	}
	a.json(t, &created)
	formbrowser.Consent(t, p.URL, created.Links.Consent.Href, "12345678901", "accept")

	var list struct {
		Data []struct{ Href string } `json:"data"`
	}
	mustDo(t, "GET", p.URL+"/api/flows/"+created.FlowID+"/attachments", tok, "").json(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("attachments after the acceptance: %+v", list)
	}
	receipt := string(mustDo(t, "GET", p.URL+list.Data[0].Href, tok, "").Body)
	dir := t.TempDir()
	file, forged, jwksFile := filepath.Join(dir, "r.jwt"), filepath.Join(dir, "forged.jwt"), filepath.Join(dir, "jwks.json")
	parts := strings.Split(receipt, ".")
	parts[2] = strings.Repeat("A", len(parts[2]))
	for name, content := range map[string]string{file: receipt, forged: strings.Join(parts, "."),
		jwksFile: string(mustDo(t, "GET", p.URL+"/oauth/jwks", "", "").Body)} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := getenvOf(p.Env)

	// A receipt is signed by flowd, but it is no access token.
	if a := mustDo(t, "GET", p.URL+"/api/flows", receipt, ""); a.Status != 401 {
		t.Fatalf("a receipt as a bearer token: %d", a.Status)
	}

	out, err := flowdtest.RunCLI(env, "", "receipts", "verify", file)
	if err != nil || !strings.HasPrefix(out, "Valid: ") || !strings.Contains(out, created.FlowID) || !strings.Contains(out, "accepted") {
		t.Fatalf("receipts verify against the database: %q %v", out, err)
	}
	for _, jwks := range []string{p.URL + "/oauth/jwks", jwksFile} {
		out, err := flowdtest.RunCLI(env, "", "receipts", "verify", file, "--jwks", jwks, "--json")
		var v struct {
			Valid   bool
			Receipt struct{ FlowID string }
		}
		if err != nil || json.Unmarshal([]byte(out), &v) != nil || !v.Valid || v.Receipt.FlowID != created.FlowID {
			t.Fatalf("receipts verify --jwks %s: %q %v", jwks, out, err)
		}
	}
	for _, args := range [][]string{{forged}, {forged, "--jwks", jwksFile}} {
		if out, err := flowdtest.RunCLI(env, "", append([]string{"receipts", "verify"}, args...)...); err == nil ||
			!strings.Contains(err.Error(), "not valid") {
			t.Errorf("receipts verify %v of a forged receipt: %q %v", args, out, err)
		}
	}
}
