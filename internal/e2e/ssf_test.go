package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// setReceiver is a Shared Signals receiver written apart from flowd's
// code: it checks each SET against the keys at the transmitter's
// published jwks_uri with lestrrat-go/jwx (flowd signs with go-jose), and
// keeps the claims.
type setReceiver struct {
	t       *testing.T
	jwksURI string
	mu      sync.Mutex
	sets    []map[string]any
	srv     *httptest.Server
}

func newSETReceiver(t *testing.T, jwksURI string) *setReceiver {
	r := &setReceiver{t: t, jwksURI: jwksURI}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if ct := req.Header.Get("Content-Type"); ct != "application/secevent+jwt" {
			t.Errorf("a push's Content-Type is %q, want application/secevent+jwt", ct)
		}
		claims, err := r.verify(string(body))
		if err != nil {
			t.Errorf("a pushed SET: %v", err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"err":"invalid_key","description":%q}`, err.Error())
			return
		}
		r.mu.Lock()
		r.sets = append(r.sets, claims)
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// verify checks a SET's signature with the published keys and its typ,
// and returns its claims.
func (r *setReceiver) verify(token string) (map[string]any, error) {
	keys, err := jwk.Fetch(context.Background(), r.jwksURI)
	if err != nil {
		return nil, fmt.Errorf("the JWKS: %w", err)
	}
	msg, err := jws.Parse([]byte(token))
	if err != nil {
		return nil, err
	}
	if typ := msg.Signatures()[0].ProtectedHeaders().Type(); typ != "secevent+jwt" {
		return nil, fmt.Errorf("typ %q, want secevent+jwt", typ)
	}
	payload, err := jws.Verify([]byte(token), jws.WithKeySet(keys, jws.WithInferAlgorithmFromKey(true)))
	if err != nil {
		return nil, fmt.Errorf("the signature does not verify with the published keys: %w", err)
	}
	var claims map[string]any
	return claims, json.Unmarshal(payload, &claims)
}

// find returns the claims of the first SET carrying event whose sub_id
// names subject (a consent's flow id or a stream's id).
func (r *setReceiver) find(event, subject string) (map[string]any, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var saw []string
	for _, c := range r.sets {
		events, _ := c["events"].(map[string]any)
		for typ := range events {
			saw = append(saw, typ)
		}
		if _, ok := events[event]; ok && subjectOf(c) == subject {
			return c, ""
		}
	}
	return nil, fmt.Sprintf("%d SETs: %v", len(r.sets), saw)
}

func subjectOf(claims map[string]any) string {
	sub, _ := claims["sub_id"].(map[string]any)
	if consent, ok := sub["consent"].(map[string]any); ok {
		id, _ := consent["id"].(string)
		return id
	}
	id, _ := sub["id"].(string)
	return id
}

func (r *setReceiver) await(t *testing.T, event, subject string) map[string]any {
	t.Helper()
	var got map[string]any
	testwait.For(t, event+" for "+subject, func() (bool, string) {
		var saw string
		got, saw = r.find(event, subject)
		return got != nil, saw
	})
	return got
}

const (
	consentRevoked = "urn:flowd:event:consent-revoked"
	verification   = "https://schemas.openid.net/secevent/ssf/event-type/verification"
	incomeResource = "https://api.tax.example/income"
)

type streamJSON struct {
	StreamID        string   `json:"stream_id"`
	Iss             string   `json:"iss"`
	Aud             string   `json:"aud"`
	EventsDelivered []string `json:"events_delivered"`
	Delivery        struct {
		Method      string `json:"method"`
		EndpointURL string `json:"endpoint_url"`
	} `json:"delivery"`
}

type pollAnswer struct {
	SETs          map[string]string `json:"sets"`
	MoreAvailable bool              `json:"moreAvailable"`
}

// TestADataHolderHearsOfAWithdrawalBySharedSignals: a data holder's
// receiver reads the transmitter's configuration, makes a push and a poll
// stream, verifies the push stream, and hears of the bank's withdrawal of a
// consent whose definition names its resource on both, signed with the
// published keys and naming nothing personal; the poll stream acknowledges,
// reports an error and is told when more wait; a paused stream holds its
// SETs until resumed; another organization sees none of the streams.
func TestADataHolderHearsOfAWithdrawalBySharedSignals(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"), flowdtest.WithEnv("FLOWD_ALLOW_INSECURE_URLS", "true"),
		flowdtest.WithEnv("FLOWD_WEBHOOK_ALLOW_PRIVATE", "true"))
	_, holder := createOrgAndClient(t, in, "Tax Office", "TAX")
	bank, bankAPI := createOrgAndClient(t, in, "Acme Bank", "ACME")
	_, other := createOrgAndClient(t, in, "Other Holder", "OTH")

	var conf map[string]any
	call(t, http.DefaultClient, "GET", in.URL+"/.well-known/ssf-configuration", "", &conf)
	for key, want := range map[string]string{"spec_version": "1_0", "issuer": in.URL, "jwks_uri": in.URL + "/oauth/jwks",
		"configuration_endpoint": in.URL + "/ssf/streams", "status_endpoint": in.URL + "/ssf/status", "verification_endpoint": in.URL + "/ssf/verify",
		"add_subject_endpoint": in.URL + "/ssf/subjects:add", "remove_subject_endpoint": in.URL + "/ssf/subjects:remove"} {
		if conf[key] != want {
			t.Errorf("configuration %s = %v, want %s", key, conf[key], want)
		}
	}
	if fmt.Sprint(conf["delivery_methods_supported"]) != "[urn:ietf:rfc:8935 urn:ietf:rfc:8936]" {
		t.Errorf("delivery_methods_supported = %v", conf["delivery_methods_supported"])
	}
	jwksURI, _ := conf["jwks_uri"].(string)

	if resp := call(t, holder, "POST", in.URL+"/api/resources", `{"uri":"`+incomeResource+`","name":"Income"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("resource: %d", resp.StatusCode)
	}
	if resp := call(t, bankAPI, "POST", in.URL+"/api/flow-definitions", `{"id":"loan","title":{"en":"Share your income","nb":"Del inntekten din"},
		"purpose":{"en":"We check it.","nb":"Vi sjekker den."},"dataCategories":[{"en":"Income","nb":"Inntekt"}],
		"resources":["`+incomeResource+`"]}`, nil); resp.StatusCode != 201 {
		t.Fatalf("definition: %d", resp.StatusCode)
	}

	recv := newSETReceiver(t, jwksURI)
	var push, poll streamJSON
	if resp := call(t, holder, "POST", in.URL+"/ssf/streams", `{"delivery":{"method":"urn:ietf:rfc:8935","endpoint_url":"`+recv.srv.URL+`/ssf"},
		"events_requested":["`+consentRevoked+`","urn:example:not-flowds"]}`, &push); resp.StatusCode != 201 {
		t.Fatalf("push stream: %d %+v", resp.StatusCode, push)
	}
	if fmt.Sprint(push.EventsDelivered) != "["+consentRevoked+"]" || push.Iss != in.URL || push.Aud == "" {
		t.Errorf("push stream: %+v, want events_delivered [%s], iss %s and an aud", push, consentRevoked, in.URL)
	}
	if resp := call(t, holder, "POST", in.URL+"/ssf/streams", `{"delivery":{"method":"urn:ietf:rfc:8936"},"events_requested":["`+consentRevoked+`"]}`,
		&poll); resp.StatusCode != 201 || poll.Delivery.EndpointURL != in.URL+"/ssf/poll/"+poll.StreamID {
		t.Fatalf("poll stream: %d %+v", resp.StatusCode, poll)
	}

	// Bad input changes nothing; another organization sees nothing.
	if resp := call(t, holder, "POST", in.URL+"/ssf/streams", `{"delivery":{"method":"carrier-pigeon"}}`, nil); resp.StatusCode != 400 {
		t.Errorf("a stream by an unknown method: %d, want 400", resp.StatusCode)
	}
	var mine []streamJSON
	if call(t, holder, "GET", in.URL+"/ssf/streams", "", &mine); len(mine) != 2 {
		t.Errorf("the holder's streams: %+v, want the two it made", mine)
	}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/ssf/streams?stream_id=" + push.StreamID, ""},
		{"GET", "/ssf/status?stream_id=" + push.StreamID, ""},
		{"POST", "/ssf/status", `{"stream_id":"` + push.StreamID + `","status":"disabled"}`},
		{"POST", "/ssf/verify", `{"stream_id":"` + push.StreamID + `"}`},
		{"POST", "/ssf/poll/" + poll.StreamID, `{"returnImmediately":true}`},
		{"DELETE", "/ssf/streams?stream_id=" + poll.StreamID, ""},
	} {
		if resp := call(t, other, r.method, in.URL+r.path, r.body, nil); resp.StatusCode != 404 {
			t.Errorf("another organization's %s %s: %d, want 404", r.method, r.path, resp.StatusCode)
		}
	}
	var theirs []streamJSON
	if call(t, other, "GET", in.URL+"/ssf/streams", "", &theirs); len(theirs) != 0 {
		t.Errorf("another organization lists %+v", theirs)
	}

	// Verification.
	if resp := call(t, holder, "POST", in.URL+"/ssf/verify", `{"stream_id":"`+push.StreamID+`","state":"s-1"}`, nil); resp.StatusCode != 204 {
		t.Fatalf("verify: %d", resp.StatusCode)
	}
	ver := recv.await(t, verification, push.StreamID)
	if ev := ver["events"].(map[string]any)[verification].(map[string]any); ev["state"] != "s-1" {
		t.Errorf("verification event %v, want state s-1", ev)
	}

	// A withdrawal through the API reaches the push stream.
	withdrawn := func() string {
		t.Helper()
		var created struct {
			FlowID string `json:"flowId"`
			Links  struct {
				Consent struct{ Href string } `json:"consent"`
			} `json:"_links"`
		}
		call(t, bankAPI, "POST", in.URL+"/api/flows", `{"nationalId":"12345678901","lastName":"Nordmann","redirectUrl":"https://bank.example/done",
			"flowDefinitionId":"loan"}`, &created)
		acceptWithoutBrowser(t, in.URL, created.Links.Consent.Href)
		if resp := call(t, bankAPI, "POST", in.URL+"/api/flows/"+created.FlowID+"/withdraw", `{"reason":"Asked by phone."}`, nil); resp.StatusCode != 200 {
			t.Fatalf("withdraw: %d", resp.StatusCode)
		}
		return created.FlowID
	}
	first := withdrawn()
	set := recv.await(t, consentRevoked, first)
	ev := set["events"].(map[string]any)[consentRevoked].(map[string]any)
	if ev["reason"] != "withdrawn" || ev["initiator"] != "organization" || ev["event_timestamp"] == nil {
		t.Errorf("consent-revoked event %v, want reason withdrawn, initiator organization, event_timestamp", ev)
	}
	sub := set["sub_id"].(map[string]any)
	if sub["format"] != "complex" || fmt.Sprint(sub["organization"]) != fmt.Sprint(map[string]any{"format": "opaque", "id": bank.ID}) {
		t.Errorf("sub_id %v, want complex with the consent and the bank", sub)
	}
	if set["iss"] != in.URL || set["aud"] != push.Aud || set["jti"] == "" || set["iat"] == nil || set["txn"] == nil {
		t.Errorf("SET claims %v, want iss, the stream's aud, jti, iat and txn", set)
	}
	if raw, _ := json.Marshal(set); strings.Contains(string(raw), "12345678901") || strings.Contains(string(raw), "Nordmann") {
		t.Errorf("the SET carries personal data: %s", raw)
	}

	// The poll stream holds it, and the next one: one at a time, with
	// moreAvailable; unacknowledged, it comes again; then ack and setErrs.
	second := withdrawn()
	var got pollAnswer
	call(t, holder, "POST", in.URL+"/ssf/poll/"+poll.StreamID, `{"maxEvents":1,"returnImmediately":true}`, &got)
	if len(got.SETs) != 1 || !got.MoreAvailable {
		t.Fatalf("the first poll: %+v, want one SET and moreAvailable", got)
	}
	var jti1 string
	for jti, token := range got.SETs {
		jti1 = jti
		claims, err := recv.verify(token)
		if err != nil || subjectOf(claims) != first || claims["jti"] != jti {
			t.Errorf("the polled SET %v (%v), want the first withdrawal's under its jti", claims, err)
		}
	}
	var again pollAnswer
	call(t, holder, "POST", in.URL+"/ssf/poll/"+poll.StreamID, `{"maxEvents":1,"returnImmediately":true}`, &again)
	if _, ok := again.SETs[jti1]; !ok || len(again.SETs) != 1 {
		t.Errorf("a poll without the ack: %+v, want %s again", again, jti1)
	}
	var next pollAnswer
	call(t, holder, "POST", in.URL+"/ssf/poll/"+poll.StreamID, `{"ack":["`+jti1+`"],"maxEvents":5,"returnImmediately":true}`, &next)
	if len(next.SETs) != 1 || next.MoreAvailable {
		t.Fatalf("after the ack: %+v, want the second SET alone", next)
	}
	var jti2 string
	for jti, token := range next.SETs {
		jti2 = jti
		if claims, err := recv.verify(token); err != nil || subjectOf(claims) != second {
			t.Errorf("the second polled SET %v (%v), want the second withdrawal's", claims, err)
		}
	}
	var last pollAnswer
	call(t, holder, "POST", in.URL+"/ssf/poll/"+poll.StreamID, `{"setErrs":{"`+jti2+`":{"err":"invalid_audience","description":"not ours"}},
		"maxEvents":5,"returnImmediately":true}`, &last)
	if len(last.SETs) != 0 || last.MoreAvailable {
		t.Errorf("after setErrs: %+v, want nothing left", last)
	}
	recv.await(t, consentRevoked, second)

	// Paused, the push stream holds a withdrawal; resumed, it sends it.
	var status struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	if resp := call(t, holder, "POST", in.URL+"/ssf/status", `{"stream_id":"`+push.StreamID+`","status":"paused","reason":"maintenance"}`,
		&status); resp.StatusCode != 200 || status.Status != "paused" {
		t.Fatalf("pause: %d %+v", resp.StatusCode, status)
	}
	call(t, holder, "GET", in.URL+"/ssf/status?stream_id="+push.StreamID, "", &status)
	if status.Status != "paused" || status.Reason != "maintenance" {
		t.Errorf("status %+v, want paused for maintenance", status)
	}
	third := withdrawn()
	if got, _ := recv.find(consentRevoked, third); got != nil {
		t.Errorf("a paused stream pushed %v", got)
	}
	if resp := call(t, holder, "POST", in.URL+"/ssf/status", `{"stream_id":"`+push.StreamID+`","status":"enabled"}`, nil); resp.StatusCode != 200 {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	recv.await(t, consentRevoked, third)
}
