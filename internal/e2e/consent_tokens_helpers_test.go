package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testkeys"
)

// The data holder of these tests: the tax authority, which serves incomes.
const (
	incomeURI  = "https://api.tax.example/income"
	incomeName = "Income records"
)

// consentTokenEnv is a lender (Acme Bank) whose consents name the tax
// authority's resource, the tax authority with a client that may
// introspect, and an organization that has nothing to do with either.
type consentTokenEnv struct {
	in                    *flowdtest.Instance
	lender, tax, stranger client
	lenderOrg, taxOrg     org
	lenderAPI             *http.Client
	// redirectURL is where flows send the person back to.
	redirectURL string
}

// newConsentTokenEnv registers the resource and the lender's definition
// "income-check", which names it and shows the parameter incomeYear.
func newConsentTokenEnv(t *testing.T, in *flowdtest.Instance) *consentTokenEnv {
	t.Helper()
	e := &consentTokenEnv{in: in, redirectURL: "https://bank.example/done"}
	e.lenderOrg, e.lender = orgWithClient(t, in, "Acme Bank", "ACME")
	e.taxOrg, e.tax = orgWithClient(t, in, "Tax Authority", "TAX")
	_, e.stranger = orgWithClient(t, in, "Nordic Insurance", "NORD")
	taxAPI := e.apiOf(t, e.tax)
	if resp := call(t, taxAPI, "POST", in.URL+"/api/resources", `{"uri":"`+incomeURI+`","name":"`+incomeName+`"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("register the resource: %d", resp.StatusCode)
	}
	e.lenderAPI = e.apiOf(t, e.lender)
	if resp := call(t, e.lenderAPI, "POST", in.URL+"/api/flow-definitions", `{"id":"income-check",
		"title":{"en":"Share your income with Acme Bank","nb":"Del inntekten din med Acme Bank"},
		"purpose":{"en":"We fetch your income from the tax authority.","nb":"Vi henter inntekten din fra Skatteetaten."},
		"dataCategories":[{"en":"Income","nb":"Inntekt"}],"validity":"P90D","resources":["`+incomeURI+`"],
		"parameters":[{"name":"incomeYear","label":{"en":"Income year","nb":"Inntektsår"}}]}`, nil); resp.StatusCode != 201 {
		t.Fatalf("create the definition: %d", resp.StatusCode)
	}
	return e
}

// orgWithClient creates an organization and a client of it by the CLI.
func orgWithClient(t *testing.T, in *flowdtest.Instance, name, prefix string) (org, client) {
	t.Helper()
	var o org
	if err := json.Unmarshal([]byte(in.CLI(t, "", "orgs", "create", "--name", name, "--prefix", prefix, "--json")), &o); err != nil {
		t.Fatal(err)
	}
	var c client
	if err := json.Unmarshal([]byte(in.CLI(t, "", "clients", "create", "--org", o.ID, "--json")), &c); err != nil {
		t.Fatal(err)
	}
	return o, c
}

// apiOf is an API client that authenticates as c.
func (e *consentTokenEnv) apiOf(t *testing.T, c client) *http.Client {
	t.Helper()
	hc := &http.Client{Transport: bearerTransport{get: func() string { return e.plainToken(t, c) }}}
	return hc
}

type bearerTransport struct{ get func() string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.get())
	return http.DefaultTransport.RoundTrip(r)
}

// plainToken is an ordinary client-credentials token of c.
func (e *consentTokenEnv) plainToken(t *testing.T, c client) string {
	t.Helper()
	status, body := e.tokenRequest(t, url.Values{"grant_type": {"client_credentials"}}, c, nil)
	if status != 200 {
		t.Fatalf("token of %s: %d %v", c.ClientID, status, body)
	}
	return body["access_token"].(string)
}

// acceptedFlow creates a flow of income-check for incomeYear 2025 and
// accepts it on its consent link.
func (e *consentTokenEnv) acceptedFlow(t *testing.T) createdFlow {
	t.Helper()
	f := e.flow(t)
	acceptWithoutBrowser(t, e.in.URL, f.Links.Consent.Href)
	return f
}

// flow creates a flow of income-check, unanswered.
func (e *consentTokenEnv) flow(t *testing.T) createdFlow {
	t.Helper()
	var f createdFlow
	if resp := call(t, e.lenderAPI, "POST", e.in.URL+"/api/flows", `{"nationalId":"`+rightID+`","lastName":"Nordmann",
		"redirectUrl":"`+e.redirectURL+`","flowDefinitionId":"income-check","parameters":{"incomeYear":"2025"}}`, &f); resp.StatusCode != 201 {
		t.Fatalf("create a flow: %d", resp.StatusCode)
	}
	return f
}

// consentForm is the form of a consent token request for flowID.
func consentForm(flowID, resource string) url.Values {
	v := url.Values{"grant_type": {"client_credentials"},
		"authorization_details": {`[{"type":"urn:flowd:consent","id":"` + flowID + `"}]`}}
	if resource != "" {
		v.Set("resource", resource)
	}
	return v
}

// tokenRequest posts form to the token endpoint, authenticated as c by
// HTTP Basic (c with a secret) or as the form says, with the headers.
func (e *consentTokenEnv) tokenRequest(t *testing.T, form url.Values, c client, headers map[string]string) (int, map[string]any) {
	t.Helper()
	return e.post(t, "/oauth/token", form, c, headers)
}

func (e *consentTokenEnv) post(t *testing.T, path string, form url.Values, c client, headers map[string]string) (int, map[string]any) {
	t.Helper()
	status, raw, _ := e.postRaw(t, path, form, c, headers)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("POST %s: %d %s", path, status, raw)
	}
	return status, body
}

func (e *consentTokenEnv) postRaw(t *testing.T, path string, form url.Values, c client, headers map[string]string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.in.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(c.ClientID), url.QueryEscape(c.ClientSecret))
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, resp.Header
}

// introspect asks, as c, about token; active says what it answered.
func (e *consentTokenEnv) introspect(t *testing.T, c client, token string) map[string]any {
	t.Helper()
	status, body := e.post(t, "/oauth/introspect", url.Values{"token": {token}}, c, nil)
	if status != 200 {
		t.Fatalf("introspect: %d %v", status, body)
	}
	return body
}

// dpopKey is a DPoP key of the lender: it makes proofs, and knows its
// thumbprint.
type dpopKey struct {
	private jwk.Key
	public  jwk.Key
}

func newDPoPKey(t *testing.T) dpopKey {
	t.Helper()
	k, err := jwk.FromRaw(testkeys.EC(t))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := k.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return dpopKey{private: k, public: pub}
}

// proof is a DPoP proof (RFC 9449 4.2) for a POST to u.
func (k dpopKey) proof(t *testing.T, u string) string {
	t.Helper()
	tok, err := jwt.NewBuilder().Claim("htm", "POST").Claim("htu", u).IssuedAt(time.Now()).JwtID(randomID(t)).Build()
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	_ = h.Set(jws.TypeKey, "dpop+jwt")
	_ = h.Set(jws.JWKKey, k.public)
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256, k.private, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(signed)
}

func (k dpopKey) thumbprint(t *testing.T) string {
	t.Helper()
	sum, err := k.public.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}

// clientAssertion is a private_key_jwt assertion (RFC 7523) of clientID,
// signed with key under kid.
func clientAssertion(t *testing.T, clientID, aud, kid string, key *ecdsa.PrivateKey) string {
	t.Helper()
	k, err := jwk.FromRaw(key)
	if err != nil {
		t.Fatal(err)
	}
	_ = k.Set(jwk.KeyIDKey, kid)
	tok, err := jwt.NewBuilder().Issuer(clientID).Subject(clientID).Audience([]string{aud}).IssuedAt(time.Now()).
		Expiration(time.Now().Add(time.Minute)).JwtID(randomID(t)).Build()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256, k))
	if err != nil {
		t.Fatal(err)
	}
	return string(signed)
}

func randomID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// dataHolder verifies what flowd gives it offline, with the published keys
// and a JOSE library other than the one flowd signs with.
type dataHolder struct {
	keys jwk.Set
	iss  string
}

func newDataHolder(t *testing.T, in *flowdtest.Instance) dataHolder {
	t.Helper()
	set, err := jwk.Fetch(context.Background(), in.URL+"/oauth/jwks")
	if err != nil {
		t.Fatal(err)
	}
	return dataHolder{keys: set, iss: in.URL}
}

// verify checks a JWS of typ for aud and returns its claims: signature by
// a published key, typ, iss, aud, exp and iat.
func (d dataHolder) verify(t *testing.T, raw, typ, aud string) map[string]any {
	t.Helper()
	msg, err := jws.Parse([]byte(raw))
	if err != nil {
		t.Fatalf("not a JWS: %v", err)
	}
	if got := msg.Signatures()[0].ProtectedHeaders().Type(); got != typ {
		t.Fatalf("typ %q, want %q", got, typ)
	}
	tok, err := jwt.Parse([]byte(raw), jwt.WithKeySet(d.keys), jwt.WithIssuer(d.iss), jwt.WithAudience(aud), jwt.WithValidate(true),
		jwt.WithRequiredClaim(jwt.IssuedAtKey))
	if err != nil {
		t.Fatalf("the data holder refuses it: %v", err)
	}
	claims, err := tok.AsMap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return claims
}

// auditRefusals counts the consent tokens refused to organizationID that
// its audit log holds, with the latest's detail.
func auditRefusals(t *testing.T, in *flowdtest.Instance, organizationID string) (int, string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), in.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var (
		n      int
		detail string
	)
	err = conn.QueryRow(context.Background(), `select count(*), coalesce((array_agg(detail order by id desc))[1], '')
		from audit_log where organization_id = $1 and action = 'consent_token.refused'`, organizationID).Scan(&n, &detail)
	if err != nil {
		t.Fatal(err)
	}
	return n, detail
}

// sql runs a statement on in's database, as an operator would.
func sql(t *testing.T, in *flowdtest.Instance, statement string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), in.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), statement, args...); err != nil {
		t.Fatal(err)
	}
}
