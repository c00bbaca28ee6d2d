package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/browsertest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// signedDelivery is one request a capturing receiver got.
type signedDelivery struct {
	ID, Timestamp, Signature string
	Body                     []byte
}

// capturingReceiver answers 204 to every delivery and keeps it.
type capturingReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []signedDelivery
}

func newCapturingReceiver(t *testing.T) *capturingReceiver {
	r := &capturingReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, signedDelivery{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
			Signature: req.Header.Get("webhook-signature"), Body: body})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// await returns the deliveries once n have arrived.
func (r *capturingReceiver) await(t *testing.T, n int) []signedDelivery {
	t.Helper()
	var got []signedDelivery
	testwait.For(t, fmt.Sprintf("%d deliveries", n), func() (bool, string) {
		r.mu.Lock()
		got = append([]signedDelivery(nil), r.got...)
		r.mu.Unlock()
		return len(got) >= n, fmt.Sprintf("%d arrived", len(got))
	})
	return got
}

// verifyScript checks a Standard Webhooks v1a signature with Node's
// crypto (OpenSSL's ed25519, not Go's): once with the key from the JWKS,
// once with the whpk_ key, and prints how many v1a signatures verified.
const verifyScript = `
const crypto = require("node:crypto");
const input = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const content = Buffer.from(input.id + "." + input.timestamp + "." + input.body);
const fromJWK = crypto.createPublicKey({ key: input.jwk, format: "jwk" });
const raw = Buffer.from(input.whpk.replace(/^whpk_/, ""), "base64");
const fromRaw = crypto.createPublicKey({ key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), raw]), format: "der", type: "spki" });
let n = 0;
for (const part of input.signature.split(" ")) {
  if (!part.startsWith("v1a,")) continue;
  const sig = Buffer.from(part.slice(4), "base64");
  if (crypto.verify(null, content, fromJWK, sig) && crypto.verify(null, content, fromRaw, sig)) n++;
}
console.log(n);
`

// verifyWithNode returns how many of d's v1a signatures Node verifies with the key.
func verifyWithNode(t *testing.T, d signedDelivery, jwk map[string]any, whpk string) string {
	t.Helper()
	node := os.Getenv("FLOWD_NODE")
	if node == "" {
		var err error
		if node, err = exec.LookPath("node"); err != nil {
			t.Fatal("node not found: `make test` installs it with apt-get (apt-get install nodejs npm), or set FLOWD_NODE")
		}
	}
	script := filepath.Join(t.TempDir(), "verify.cjs")
	if err := os.WriteFile(script, []byte(verifyScript), 0o600); err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"id": d.ID, "timestamp": d.Timestamp, "body": string(d.Body), "signature": d.Signature,
		"jwk": jwk, "whpk": whpk})
	cmd := exec.CommandContext(t.Context(), node, script)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestAsymmetricThinEndpointInABrowser: an admin switches an endpoint to
// asymmetric signing and thin payloads in the console, sends it a test event
// from the webhooks page, and the receiver gets a thin body signed v1 and
// v1a (the endpoint is moving); Node verifies the v1a signature with the
// organization's published keys, fetched without authentication. A real
// flow's thin event carries nothing personal.
func TestAsymmetricThinEndpointInABrowser(t *testing.T) {
	t.Parallel()
	e := &consoleEnv{in: flowdtest.Start(t)}
	e.acme, e.acmeAPI = createOrgAndClient(t, e.in, "Acme Bank", "ACME")
	e.staff(t, e.acme.ID, "ada@acme.example", "Ada Admin", "admin")
	base := e.in.URL
	rcv := newCapturingReceiver(t)
	var endpoint struct{ ID, Signing, Payload string }
	if resp := call(t, e.acmeAPI, "POST", base+"/api/webhook-endpoints", `{"url":"`+rcv.srv.URL+`/hooks"}`, &endpoint); resp.StatusCode != 201 ||
		endpoint.Signing != "symmetric" || endpoint.Payload != "full" {
		t.Fatalf("create endpoint: %d %+v", resp.StatusCode, endpoint)
	}

	b := browsertest.New(t, browsertest.Desktop)
	signInBrowser(t, b, base, "ada@acme.example", nil)
	clickTo(t, b, `nav a[href="/console/webhooks"]`, "/console/webhooks")
	wantText(t, b, "symmetric · full", "Signing keys", "whpk_", "Event types", "flow.accepted", "The individual accepted.")
	clickTo(t, b, `a[href="/console/webhooks/`+endpoint.ID+`/edit"]`, "/edit")
	b.Run(chromedp.SetValue("#signing", "asymmetric", chromedp.ByQuery), chromedp.SetValue("#payload", "thin", chromedp.ByQuery))
	b.Screenshot("desktop-01-asymmetric-thin")
	clickTo(t, b, `form[action="/console/webhooks/`+endpoint.ID+`"] button[type=submit]`, "notice=endpoint_saved")
	wantText(t, b, "asymmetric · thin")
	b.Run(chromedp.SetValue("#test-type-"+endpoint.ID, "flow.accepted", chromedp.ByQuery))
	clickTo(t, b, `form[action="/console/webhooks/`+endpoint.ID+`/test"] button`, "notice=test_event_sent")
	wantText(t, b, "A test event (flow.accepted")
	b.Screenshot("desktop-02-test-event-sent")

	d := rcv.await(t, 1)[0]
	var thin struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(d.Body, &thin); err != nil || thin.Type != "flow.accepted" || thin.Data["eventId"] != d.ID ||
		thin.Data["status"] != nil {
		t.Fatalf("the test delivery: %s", d.Body)
	}
	if !strings.HasPrefix(d.Signature, "v1a,") || !strings.Contains(d.Signature, " v1,") {
		t.Errorf("the moving endpoint's delivery is signed %q, want its v1a, then the v1 it moves from", d.Signature)
	}

	// The published keys, without a token.
	resp, err := http.Get(base + "/webhooks/" + e.acme.ID + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	var keys struct {
		Keys       []map[string]any `json:"keys"`
		PublicKeys []struct {
			KeyID string `json:"kid"`
			Key   string `json:"key"`
		} `json:"publicKeys"`
	}
	err = json.NewDecoder(resp.Body).Decode(&keys)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "public, max-age=300" || len(keys.Keys) != 1 ||
		len(keys.PublicKeys) != 1 || keys.Keys[0]["kid"] != keys.PublicKeys[0].KeyID {
		t.Fatalf("published keys: %d %q %+v %v", resp.StatusCode, resp.Header.Get("Cache-Control"), keys, err)
	}
	if n := verifyWithNode(t, d, keys.Keys[0], keys.PublicKeys[0].Key); n != "1" {
		t.Errorf("Node verified %s of the v1a signatures of %q, want 1", n, d.Signature)
	}
	// Tampered with, it no longer verifies.
	forged := d
	forged.Body = []byte(strings.Replace(string(d.Body), "flow.accepted", "flow.rejected", 1))
	if n := verifyWithNode(t, forged, keys.Keys[0], keys.PublicKeys[0].Key); n != "0" {
		t.Errorf("Node verified %s signatures of a changed body", n)
	}

	// After a rotation (the CLI) both keys are published and both sign.
	var rotated struct {
		Keys []struct {
			KeyID     string  `json:"kid"`
			ExpiresAt *string `json:"expiresAt"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(e.in.CLI(t, "", "orgs", "rotate-webhook-key", "--org", e.acme.ID, "--json")), &rotated); err != nil ||
		len(rotated.Keys) != 2 || rotated.Keys[1].KeyID != keys.PublicKeys[0].KeyID || rotated.Keys[1].ExpiresAt == nil {
		t.Fatalf("rotate-webhook-key: %+v, %v", rotated, err)
	}
	var sent struct{ EventID string }
	if resp := call(t, e.acmeAPI, "POST", base+"/api/webhook-endpoints/"+endpoint.ID+"/test", `{"eventType":"flow.opened"}`, &sent); resp.StatusCode != 202 {
		t.Fatalf("test event over the API: %d", resp.StatusCode)
	}
	afterRotation := rcv.await(t, 2)[1]
	resp, err = http.Get(base + "/webhooks/" + e.acme.ID + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&keys)
	resp.Body.Close()
	if err != nil || len(keys.Keys) != 2 || keys.Keys[1]["kid"] != rotated.Keys[1].KeyID {
		t.Fatalf("published keys after the rotation: %+v, %v", keys, err)
	}
	for i := range keys.Keys {
		if n := verifyWithNode(t, afterRotation, keys.Keys[i], keys.PublicKeys[i].Key); n != "1" {
			t.Errorf("after the rotation key %d verified %s of %q, want 1", i, n, afterRotation.Signature)
		}
	}

	// A real flow's thin event names its ids and links, nothing personal.
	const nationalID, lastName = "29029900157", "Nordmann"
	f := e.createFlow(t, e.acmeAPI, nationalID, "")
	created := rcv.await(t, 3)[2]
	for _, personal := range []string{nationalID, lastName, "Unopened", "status"} {
		if strings.Contains(string(created.Body), personal) {
			t.Errorf("the thin flow.created carries %q: %s", personal, created.Body)
		}
	}
	if !strings.Contains(string(created.Body), `"flow":"/api/flows/`+f.FlowID+`"`) ||
		!strings.Contains(string(created.Body), `"referenceId":"`+f.ReferenceID+`"`) {
		t.Errorf("the thin flow.created lacks the flow's link or reference: %s", created.Body)
	}
}
