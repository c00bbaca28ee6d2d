package e2e

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testkeys"
)

// TestConsentTokensADataHolderVerifiesOffline: the lender gets a consent
// token by every client authentication, DPoP-bound with a proof; the data
// holder verifies it with the published keys and jwx (aud, exp, typ,
// cnf.jkt, authorization_details) and introspects it, plain and signed; the
// token is a use on the ledger with flow.used; discovery says so. The
// consent's withdrawal, expiry and erasure turn introspection inactive at
// once; another organization's client learns nothing.
func TestConsentTokensADataHolderVerifiesOffline(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"), flowdtest.WithEnv("FLOWD_ALLOW_INSECURE_URLS", "true"),
		flowdtest.WithEnv("FLOWD_WEBHOOK_ALLOW_PRIVATE", "true"))
	e := newConsentTokenEnv(t, in)
	hooks := newReceiver(t, e.lenderOrg.WebhookSecret)
	if resp := call(t, e.lenderAPI, "POST", in.URL+"/api/webhook-endpoints",
		`{"url":"`+hooks.srv.URL+`/ledger","eventTypes":["flow.used"]}`, nil); resp.StatusCode != 201 {
		t.Fatalf("endpoint: %d", resp.StatusCode)
	}
	f := e.acceptedFlow(t)
	holder := newDataHolder(t, in)

	var discovery map[string]any
	call(t, e.lenderAPI, "GET", in.URL+"/.well-known/oauth-authorization-server", "", &discovery)
	if got, _ := discovery["authorization_details_types_supported"].([]any); !slices.Equal(got, []any{"urn:flowd:consent"}) {
		t.Errorf("discovery's authorization_details_types_supported: %v", discovery["authorization_details_types_supported"])
	}

	// DPoP-bound, the client authenticated by HTTP Basic.
	key := newDPoPKey(t)
	status, body := e.tokenRequest(t, consentForm(f.FlowID, incomeURI), e.lender, map[string]string{"DPoP": key.proof(t, in.URL+"/oauth/token")})
	if status != 200 || body["token_type"] != "DPoP" || body["refresh_token"] != nil || body["authorization_details"] == nil {
		t.Fatalf("consent token: %d %v", status, body)
	}
	raw := body["access_token"].(string)
	claims := holder.verify(t, raw, "consent-token+jwt", incomeURI)
	exp, iat := claims["exp"].(time.Time), claims["iat"].(time.Time)
	if d := exp.Sub(iat); d <= 0 || d > 120*time.Second {
		t.Errorf("the token lives %v, want at most 120s", d)
	}
	if cnf, _ := claims["cnf"].(map[string]any); cnf["jkt"] != key.thumbprint(t) {
		t.Errorf("cnf %v, want the DPoP key's thumbprint %s", claims["cnf"], key.thumbprint(t))
	}
	details, _ := claims["authorization_details"].([]any)
	if len(details) != 1 {
		t.Fatalf("authorization_details: %v", claims["authorization_details"])
	}
	d := details[0].(map[string]any)
	from, to, def := d["from"].(map[string]any), d["to"].(map[string]any), d["definition"].(map[string]any)
	if d["type"] != "urn:flowd:consent" || d["id"] != f.FlowID || from["nationalId"] != rightID || from["format"] != "generic" ||
		to["organizationId"] != e.lenderOrg.ID || to["organizationName"] != "Acme Bank" || d["consented"] == "" || d["validTo"] == nil ||
		!slices.Equal(d["resources"].([]any), []any{incomeURI}) || d["parameters"].(map[string]any)["incomeYear"] != "2025" ||
		def["id"] != "income-check" || def["version"] != float64(1) || len(def["textSha256"].(string)) != 64 {
		t.Errorf("authorization_details: %v", d)
	}
	if validTo, err := time.Parse(time.RFC3339, d["validTo"].(string)); err != nil || exp.After(validTo) {
		t.Errorf("the token outlives the consent's validTo %v: exp %v", d["validTo"], exp)
	}
	// flowd's own API takes no consent token.
	if s := apiStatus(t, in.URL, raw); s != 401 {
		t.Errorf("the API answered a consent token with %d", s)
	}

	// The other client authentications: client_secret_post and private_key_jwt.
	form := consentForm(f.FlowID, incomeURI)
	form.Set("client_id", e.lender.ClientID)
	form.Set("client_secret", e.lender.ClientSecret)
	if status, body := e.tokenRequest(t, form, client{}, nil); status != 200 || body["token_type"] != "Bearer" {
		t.Fatalf("client_secret_post: %d %v", status, body)
	}
	signing := testkeys.EC(t)
	keyClient := createKeyClient(t, in, e.lenderOrg.ID, testkeys.PublicJWKS(t, "k1", signing))
	form = consentForm(f.FlowID, incomeURI)
	form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
	form.Set("client_assertion", clientAssertion(t, keyClient, in.URL+"/oauth/token", "k1", signing))
	status, body = e.tokenRequest(t, form, client{}, nil)
	if status != 200 {
		t.Fatalf("private_key_jwt: %d %v", status, body)
	}
	holder.verify(t, body["access_token"].(string), "consent-token+jwt", incomeURI)

	// Three tokens, three uses on the ledger, each naming the resource,
	// in the API and in flow.used.
	var uses struct {
		Data []struct{ ID, Action, Reference, Resource string } `json:"data"`
	}
	call(t, e.lenderAPI, "GET", in.URL+"/api/flows/"+f.FlowID+"/uses", "", &uses)
	if len(uses.Data) != 3 {
		t.Fatalf("uses: %+v, want 3", uses.Data)
	}
	for _, u := range uses.Data {
		if u.Action != "consent-token" || !strings.HasPrefix(u.Reference, "token ") || u.Resource != incomeURI {
			t.Errorf("use %+v, want action consent-token, reference token <jti>, resource %s", u, incomeURI)
		}
	}
	used := hooks.waitFor("flow.used")
	data, _ := used["data"].(map[string]any)
	if use, _ := data["use"].(map[string]any); data["flowId"] != f.FlowID || use["resource"] != incomeURI ||
		!slices.ContainsFunc(uses.Data, func(u struct{ ID, Action, Reference, Resource string }) bool { return u.ID == use["id"] }) {
		t.Errorf("flow.used: %v, want one of the uses %+v with resource %s", used, uses.Data, incomeURI)
	}

	// Introspection: the data holder sees it active, plain and signed;
	// no one else learns anything.
	if got := e.introspect(t, e.tax, raw); got["active"] != true || got["aud"] != incomeURI || got["token_type"] != "DPoP" ||
		got["authorization_details"] == nil || got["cnf"].(map[string]any)["jkt"] != key.thumbprint(t) {
		t.Errorf("the data holder's introspection: %v", got)
	}
	for name, c := range map[string]client{"the lender": e.lender, "a stranger": e.stranger} {
		if got := e.introspect(t, c, raw); len(got) != 1 || got["active"] != false {
			t.Errorf("%s introspects: %v, want only active false", name, got)
		}
	}
	status, signed, header := e.postRaw(t, "/oauth/introspect", url.Values{"token": {raw}}, e.tax,
		map[string]string{"Accept": "application/token-introspection+jwt"})
	if status != 200 || header.Get("Content-Type") != "application/token-introspection+jwt" {
		t.Fatalf("signed introspection: %d %s %s", status, header.Get("Content-Type"), signed)
	}
	answer := holder.verify(t, string(signed), "token-introspection+jwt", e.tax.ClientID)
	if ti, _ := answer["token_introspection"].(map[string]any); ti["active"] != true || ti["jti"] != claims["jti"] {
		t.Errorf("token_introspection: %v", answer["token_introspection"])
	}

	// The organization withdraws: inactive at once, and no new token.
	if resp := call(t, e.lenderAPI, "POST", in.URL+"/api/flows/"+f.FlowID+"/withdraw", `{"reason":"the customer asked us"}`, nil); resp.StatusCode != 200 {
		t.Fatalf("withdraw: %d", resp.StatusCode)
	}
	if got := e.introspect(t, e.tax, raw); got["active"] != false {
		t.Errorf("after the withdrawal: %v", got)
	}
	if status, body := e.tokenRequest(t, consentForm(f.FlowID, incomeURI), e.lender, nil); status != 400 ||
		body["error"] != "invalid_authorization_details" {
		t.Errorf("a token after the withdrawal: %d %v", status, body)
	}

	// The validity ends: inactive at once, before the job marks it Expired.
	expiring := e.acceptedFlow(t)
	tok := e.consentToken(t, expiring.FlowID)
	sql(t, in, `update flows set valid_until = now() - interval '1 second' where id = $1`, expiring.FlowID)
	if got := e.introspect(t, e.tax, tok); got["active"] != false {
		t.Errorf("after the expiry: %v", got)
	}

	// The person is erased from the lender: inactive at once.
	erased := e.acceptedFlow(t)
	tok = e.consentToken(t, erased.FlowID)
	if got := e.introspect(t, e.tax, tok); got["active"] != true {
		t.Fatalf("before the erasure: %v", got)
	}
	if resp := call(t, e.lenderAPI, "POST", in.URL+"/api/erasures", `{"nationalId":"`+rightID+`"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("erasure: %d", resp.StatusCode)
	}
	if got := e.introspect(t, e.tax, tok); got["active"] != false {
		t.Errorf("after the erasure: %v", got)
	}
}

// consentToken gets a bearer consent token of flowID for the income
// resource.
func (e *consentTokenEnv) consentToken(t *testing.T, flowID string) string {
	t.Helper()
	status, body := e.tokenRequest(t, consentForm(flowID, incomeURI), e.lender, nil)
	if status != 200 {
		t.Fatalf("consent token: %d %v", status, body)
	}
	return body["access_token"].(string)
}

// TestConsentTokensRefused: every refusal is 400
// invalid_authorization_details, says why, issues nothing, and is in the
// lender's audit log; another organization's flow and none at all are
// answered alike.
func TestConsentTokensRefused(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"), flowdtest.WithEnv("FLOWD_ALLOW_INSECURE_URLS", "true"))
	e := newConsentTokenEnv(t, in)
	accepted, unanswered := e.acceptedFlow(t), e.flow(t)
	// A resource registered but not one the definition names.
	if resp := call(t, e.apiOf(t, e.tax), "POST", in.URL+"/api/resources", `{"uri":"https://api.tax.example/wealth","name":"Wealth"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("register: %d", resp.StatusCode)
	}
	noSuchFlow := "0190a8b0-0000-7000-8000-000000000000"
	details := func(s string) url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "authorization_details": {s}, "resource": {incomeURI}}
	}
	tests := []struct {
		name string
		form url.Values
		code string
		want string // in the description and the audit entry
	}{
		{"malformed", details(`{"type":`), "invalid_authorization_details", "JSON array"},
		{"two entries", details(`[{"type":"urn:flowd:consent","id":"a"},{"type":"urn:flowd:consent","id":"b"}]`), "invalid_authorization_details", "exactly one"},
		{"unknown type", details(`[{"type":"urn:altinn:consent","id":"` + accepted.FlowID + `"}]`), "invalid_authorization_details", "type is unknown"},
		{"unknown member", details(`[{"type":"urn:flowd:consent","id":"` + accepted.FlowID + `","actions":["read"]}]`), "invalid_authorization_details", "only type and id"},
		{"no such flow", consentForm(noSuchFlow, incomeURI), "invalid_authorization_details", "no flow with this id"},
		{"not accepted", consentForm(unanswered.FlowID, incomeURI), "invalid_authorization_details", "Unopened, not Accepted"},
		{"no resource", consentForm(accepted.FlowID, ""), "invalid_authorization_details", "resource is required"},
		{"unregistered resource", consentForm(accepted.FlowID, "https://api.unknown.example/x"), "invalid_authorization_details", "not one the flow's consent definition names"},
		{"resource not named", consentForm(accepted.FlowID, "https://api.tax.example/wealth"), "invalid_authorization_details", "not one the flow's consent definition names"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := auditRefusals(t, in, e.lenderOrg.ID)
			status, body := e.tokenRequest(t, tc.form, e.lender, nil)
			desc, _ := body["error_description"].(string)
			if status != 400 || body["error"] != tc.code || !strings.Contains(desc, tc.want) || body["access_token"] != nil {
				t.Fatalf("%d %v, want 400 %s saying %q", status, body, tc.code, tc.want)
			}
			after, detail := auditRefusals(t, in, e.lenderOrg.ID)
			if after != before+1 || !strings.Contains(detail, tc.want) {
				t.Errorf("audit: %d refusals (before %d), the latest %q", after, before, detail)
			}
		})
	}
	// Another organization's accepted flow is answered as one that does
	// not exist, and the stranger's refusal is in its own log.
	t.Run("another organization's flow", func(t *testing.T) {
		status, body := e.tokenRequest(t, consentForm(accepted.FlowID, incomeURI), e.stranger, nil)
		if status != 400 || body["error"] != "invalid_authorization_details" || !strings.Contains(body["error_description"].(string), "no flow with this id") {
			t.Fatalf("%d %v", status, body)
		}
	})
	// Nothing was used.
	var uses struct{ Data []any }
	call(t, e.lenderAPI, "GET", in.URL+"/api/flows/"+accepted.FlowID+"/uses", "", &uses)
	if len(uses.Data) != 0 {
		t.Errorf("refusals recorded uses: %v", uses.Data)
	}
	// A resource without authorization_details is no consent token.
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {incomeURI}}
	if status, body := e.tokenRequest(t, form, e.lender, nil); status != 400 || body["error"] != "invalid_target" {
		t.Errorf("resource alone: %d %v", status, body)
	}
}
