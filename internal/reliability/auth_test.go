package reliability_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// route is one operation of the OpenAPI document.
type route struct {
	Method, Path string
	Secured      bool
}

// apiRoutes reads every operation from the served OpenAPI document. The web
// package's TestEveryAPIRouteIsDocumented keeps the document and the router
// in step, so a new route cannot escape this suite.
func apiRoutes(t *testing.T, base string) []route {
	t.Helper()
	a := mustDo(t, "GET", base+"/api/openapi.json", "", "")
	var doc struct {
		Security []map[string]any                      `json:"security"`
		Paths    map[string]map[string]json.RawMessage `json:"paths"`
	}
	a.json(t, &doc)
	var out []route
	for path, item := range doc.Paths {
		for method, raw := range item {
			m := strings.ToUpper(method)
			switch m {
			case "GET", "POST", "PUT", "PATCH", "DELETE":
			default:
				continue
			}
			var op struct {
				Security *[]map[string]any `json:"security"`
			}
			_ = json.Unmarshal(raw, &op)
			secured := len(doc.Security) > 0
			if op.Security != nil {
				secured = len(*op.Security) > 0 && len((*op.Security)[0]) > 0
			}
			out = append(out, route{Method: m, Path: path, Secured: secured})
		}
	}
	if len(out) < 6 {
		t.Fatalf("only %d operations in the OpenAPI document", len(out))
	}
	return out
}

// ownDefinition is the consent definition the suite makes for its
// organization: another organization has none of that id.
const ownDefinition = "acme-terms"

// draftBody is a valid consent definition version.
const draftBody = `{"title":{"en":"Terms","nb":"Vilkår"},"purpose":{"en":"Why","nb":"Hvorfor"}}`

// noSuchAttachment names an attachment: the suite's flow is undecided and
// has none.
const noSuchAttachment = "00000000-0000-7000-8000-000000000000"

// noSuchRecovery names a recovery: the suite's endpoint has had none.
const noSuchRecovery = "00000000-0000-7000-8000-000000000001"

// noSuchErasure names an erasure: the suite erases no one.
const noSuchErasure = "00000000-0000-7000-8000-000000000002"

// suiteIDs are the ids of what the suite made: its flow, that flow's
// flow.created event, a webhook endpoint and a Shared Signals stream.
type suiteIDs struct{ flow, event, endpoint, stream string }

// target fills a route's parameters with the suite's ids, ownDefinition and
// its version 1, gives a recovery its since and a stream's operations its
// stream_id.
func (r route) target(base string, ids suiteIDs) string {
	p := strings.ReplaceAll(r.Path, "{flowId}", ids.flow)
	p = strings.ReplaceAll(p, "{id}", ids.flow)
	p = strings.ReplaceAll(p, "{eventId}", ids.event)
	p = strings.ReplaceAll(p, "{endpointId}", ids.endpoint)
	p = strings.ReplaceAll(p, "{definitionId}", ownDefinition)
	p = strings.ReplaceAll(p, "{version}", "1")
	p = strings.ReplaceAll(p, "{attachmentId}", noSuchAttachment)
	p = strings.ReplaceAll(p, "{recoveryId}", noSuchRecovery)
	p = strings.ReplaceAll(p, "{erasureId}", noSuchErasure)
	p = strings.ReplaceAll(p, "{streamId}", ids.stream)
	switch {
	case r.Path == "/ssf/status" || (r.Path == "/ssf/streams" && r.Method != "POST"):
		p += "?stream_id=" + ids.stream
	case r.Path == "/api/tasks":
		p += "?flowId=" + ids.flow
	case strings.HasSuffix(r.Path, "/recover"):
		p += "?since=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	}
	return base + p
}

// signingKey opens flowd's current token-signing key from the database with
// the key-encryption key, as an attacker holding both could: the suite needs
// it to mint tokens that differ from real ones in exactly one claim.
func signingKey(t *testing.T, dbURL string) (string, *ecdsa.PrivateKey) {
	t.Helper()
	pool := openPool(t, dbURL)
	var kid string
	var sealed []byte
	if err := pool.QueryRow(context.Background(), `select id, private_key_sealed from signing_keys
		where retired_at is null and purpose = 'token' and algorithm = 'ES256'`).Scan(&kid, &sealed); err != nil {
		t.Fatal(err)
	}
	kek, _ := base64.StdEncoding.DecodeString(flowdtest.TestKeyEncryptionKey)
	block, _ := aes.NewCipher(kek)
	gcm, _ := cipher.NewGCM(block)
	der, err := gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], []byte(kid))
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		t.Fatal(err)
	}
	return kid, k.(*ecdsa.PrivateKey)
}

func sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// hs256 signs header and claims with HMAC-SHA256 under secret by hand: the
// key-confusion attack, where the verifier's public key is used as an HMAC key.
func hs256(kid string, secret []byte, claims map[string]any) string {
	h, _ := json.Marshal(map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid})
	c, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func unsigned(kid string, claims map[string]any) string {
	h, _ := json.Marshal(map[string]any{"alg": "none", "typ": "JWT", "kid": kid})
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}

// claimsOf decodes a real token's claims, to copy them.
func claimsOf(t *testing.T, raw string) map[string]any {
	t.Helper()
	parts := strings.Split(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func with(c map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

// TestEveryRouteRefusesBadTokens sends a matrix of bad tokens to every
// secured operation of the OpenAPI document: each is a 401 with
// WWW-Authenticate invalid_token and changes nothing. Another organization's
// valid token finds nothing (404), and its list holds none of the flows.
func TestEveryRouteRefusesBadTokens(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	p := startFlowd(t, dbURL, "", nil)
	acme := newTenant(t, p.Env, "Acme Bank", "ACME")
	other := newTenant(t, p.Env, "Other Lender", "OTH")
	revoked := acme.withClient(t, p.Env)
	tok := acme.token(t, p.URL)
	otherTok := other.token(t, p.URL)
	revokedTok := revoked.token(t, p.URL)
	if _, err := flowdtest.RunCLI(getenvOf(p.Env), "", "clients", "revoke", revoked.ClientID); err != nil {
		t.Fatal(err)
	}
	// A token its own client revoked at the revocation endpoint (RFC 7009).
	revokedAccess := acme.token(t, p.URL)
	resp, err := http.PostForm(p.URL+"/oauth/revoke", url.Values{"token": {revokedAccess}, "client_id": {acme.ClientID}, "client_secret": {acme.ClientSecret}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	a := mustDo(t, "POST", p.URL+"/api/flows", tok, createBody("ISO123", "Berg", ""))
	if a.Status != 201 {
		t.Fatalf("create: %d %s", a.Status, a.Body)
	}
	var created struct{ FlowID string }
	a.json(t, &created)
	var events struct {
		Data []struct{ ID string } `json:"data"`
	}
	mustDo(t, "GET", p.URL+"/api/events?flowId="+created.FlowID, tok, "").json(t, &events)
	if len(events.Data) != 1 {
		t.Fatalf("the flow's events: %+v", events)
	}
	if d := mustDo(t, "POST", p.URL+"/api/flow-definitions", tok, `{"id":"`+ownDefinition+`",`+draftBody[1:]); d.Status != 201 {
		t.Fatalf("create definition: %d %s", d.Status, d.Body)
	}
	ep := mustDo(t, "POST", p.URL+"/api/webhook-endpoints", tok, `{"url":"https://hooks.acme.example/flowd"}`)
	if ep.Status != 201 {
		t.Fatalf("create webhook endpoint: %d %s", ep.Status, ep.Body)
	}
	var endpoint struct{ ID string }
	ep.json(t, &endpoint)
	st := mustDo(t, "POST", p.URL+"/ssf/streams", tok, `{"delivery":{"method":"urn:ietf:rfc:8936"}}`)
	if st.Status != 201 {
		t.Fatalf("create stream: %d %s", st.Status, st.Body)
	}
	var stream struct {
		ID string `json:"stream_id"`
	}
	st.json(t, &stream)
	ids := suiteIDs{flow: created.FlowID, event: events.Data[0].ID, endpoint: endpoint.ID, stream: stream.ID}

	kid, key := signingKey(t, dbURL)
	real := claimsOf(t, tok)
	now := time.Now().Unix()
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pubDER, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	jwk, _ := json.Marshal(jose.JSONWebKey{Key: &key.PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"})
	parts := strings.Split(tok, ".")
	tampered := with(real, "org_id", other.OrgID)
	tamperedBody, _ := json.Marshal(tampered)

	bad := map[string]string{
		"garbage":                   "not-a-token",
		"empty segments":            "..",
		"expired":                   sign(t, jose.ES256, key, kid, with(real, "exp", now-60, "iat", now-400)),
		"not yet valid":             sign(t, jose.ES256, key, kid, with(real, "nbf", now+3600, "iat", now+3600, "exp", now+7200)),
		"no exp":                    sign(t, jose.ES256, key, kid, with(real, "exp", nil)),
		"wrong audience":            sign(t, jose.ES256, key, kid, with(real, "aud", "someone-else")),
		"wrong issuer":              sign(t, jose.ES256, key, kid, with(real, "iss", "https://evil.example")),
		"alg none":                  unsigned(kid, real),
		"alg none, no kid":          unsigned("", real),
		"HS256 with the public PEM": hs256(kid, pubPEM, real),
		"HS256 with the public DER": hs256(kid, pubDER, real),
		"HS256 with the JWK":        hs256(kid, jwk, real),
		"forged by another key":     sign(t, jose.ES256, stranger, kid, real),
		"forged, unknown kid":       sign(t, jose.ES256, stranger, "unknown", real),
		"tampered payload":          parts[0] + "." + base64.RawURLEncoding.EncodeToString(tamperedBody) + "." + parts[2],
		"signature stripped":        parts[0] + "." + parts[1] + ".",
		"revoked client":            revokedTok,
		"revoked access token":      revokedAccess,
		"real key, another org":     sign(t, jose.ES256, key, kid, tampered),
		"real key, unknown client":  sign(t, jose.ES256, key, kid, with(real, "sub", "nobody", "client_id", "nobody")),
		"real key, unknown org":     sign(t, jose.ES256, key, kid, with(real, "org_id", "00000000-0000-0000-0000-000000000000")),
	}
	routes := apiRoutes(t, p.URL)
	secured := 0
	for _, r := range routes {
		if !r.Secured {
			continue
		}
		secured++
		for name, raw := range bad {
			body := ""
			if r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH" {
				body = createBody("ISO999", "Forged", "")
			}
			a := mustDo(t, r.Method, r.target(p.URL, ids), raw, body)
			if a.Status != 401 || !strings.Contains(a.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
				t.Errorf("%s %s with a %s token: %d %q %s; want 401 invalid_token", r.Method, r.Path, name, a.Status, a.Header.Get("WWW-Authenticate"), a.Body)
			}
		}
		// Another organization's valid token: the flow does not exist for it.
		if strings.Contains(r.Path, "{") || r.Path == "/api/tasks" || r.Path == "/ssf/status" && r.Method == "GET" {
			body := ""
			switch {
			case strings.HasPrefix(r.Path, "/ssf/poll/"):
				body = `{"returnImmediately":true}`
			case r.Method == "POST" && strings.HasSuffix(r.Path, "/versions"):
				body = draftBody
			case r.Method == "POST" && strings.HasSuffix(r.Path, "/withdraw"):
				body = `{"reason":"the suite"}`
			case r.Method == "POST" && strings.HasSuffix(r.Path, "/uses"):
				body = `{"action":"the suite"}`
			case r.Method == "PATCH" && strings.Contains(r.Path, "{endpointId}"):
				body = `{"enabled":false}`
			}
			a := mustDo(t, r.Method, r.target(p.URL, ids), otherTok, body)
			if a.Status != 404 {
				t.Errorf("%s %s with another organization's token: %d %s; want 404", r.Method, r.Path, a.Status, a.Body)
			}
		}
	}
	if secured < 6 {
		t.Fatalf("only %d secured operations checked", secured)
	}
	if a := mustDo(t, "GET", p.URL+"/api/flows?limit=100", otherTok, ""); a.Status != 200 || strings.Contains(string(a.Body), created.FlowID) {
		t.Errorf("another organization's list: %d %s", a.Status, a.Body)
	}
	// Nothing changed: one flow (Acme's), still active at version 1.
	pool := openPool(t, dbURL)
	if n := count(t, pool, `select count(*) from flows`); n != 1 {
		t.Errorf("%d flows after the attacks, want 1", n)
	}
	var v flowView
	var status struct {
		Flow struct{ Status string } `json:"flow"`
	}
	a = mustDo(t, "GET", p.URL+"/api/flows/"+created.FlowID, tok, "")
	a.json(t, &v)
	a.json(t, &status)
	if a.Status != 200 || v.Flow.Version != 1 || status.Flow.Status != "active" {
		t.Errorf("the flow after the attacks: %d %s", a.Status, a.Body)
	}
	if n := count(t, pool, `select count(*) from flow_deletions`); n != 0 {
		t.Errorf("%d deletions after the attacks", n)
	}
	if n := count(t, pool, `select count(*) from webhook_endpoints where enabled`); n != 1 {
		t.Errorf("%d enabled webhook endpoints after the attacks, want 1", n)
	}
	// The control: the real token works on every secured read.
	for _, r := range routes {
		if r.Secured && r.Method == "GET" {
			want := 200
			if strings.Contains(r.Path, "{attachmentId}") || strings.Contains(r.Path, "{recoveryId}") || strings.Contains(r.Path, "{erasureId}") {
				want = 404
			}
			if a := mustDo(t, r.Method, r.target(p.URL, ids), tok, ""); a.Status != want {
				t.Errorf("control: %s %s with the real token: %d %s", r.Method, r.Path, a.Status, a.Body)
			}
		}
	}
}
