package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
)

// TestTheConsoleListsADataHoldersStreams: the data holder's staff see its
// streams on the console with status, reason and what each holds
// undelivered; the organization that asks for consent sees none of them.
func TestTheConsoleListsADataHoldersStreams(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_ALLOW_INSECURE_URLS", "true"), flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"))
	tax, holder := createOrgAndClient(t, in, "Tax Office", "TAX")
	bank, bankAPI := createOrgAndClient(t, in, "Acme Bank", "ACME")
	e := &consoleEnv{in: in}
	e.staff(t, tax.ID, "tina@tax.example", "Tina Tax", "viewer")
	e.staff(t, bank.ID, "ada@acme.example", "Ada Admin", "admin")
	if resp := call(t, holder, "POST", in.URL+"/api/resources", `{"uri":"`+incomeResource+`","name":"Income"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("resource: %d", resp.StatusCode)
	}
	if resp := call(t, bankAPI, "POST", in.URL+"/api/flow-definitions", `{"id":"loan","title":{"en":"Share your income","nb":"Del inntekten din"},
		"purpose":{"en":"We check it.","nb":"Vi sjekker den."},"dataCategories":[{"en":"Income","nb":"Inntekt"}],
		"resources":["`+incomeResource+`"]}`, nil); resp.StatusCode != 201 {
		t.Fatalf("definition: %d", resp.StatusCode)
	}
	var push, poll streamJSON
	call(t, holder, "POST", in.URL+"/ssf/streams", `{"delivery":{"method":"urn:ietf:rfc:8935","endpoint_url":"http://127.0.0.1:9/ssf"},"events_requested":["`+consentRevoked+`"]}`, &push)
	call(t, holder, "POST", in.URL+"/ssf/streams", `{"delivery":{"method":"urn:ietf:rfc:8936"},"events_requested":["`+consentRevoked+`"]}`, &poll)
	if resp := call(t, holder, "POST", in.URL+"/ssf/status", `{"stream_id":"`+push.StreamID+`","status":"paused","reason":"receiver maintenance"}`,
		nil); resp.StatusCode != 200 || push.StreamID == "" || poll.StreamID == "" {
		t.Fatalf("pause: %d (streams %q, %q)", resp.StatusCode, push.StreamID, poll.StreamID)
	}

	// A withdrawal waits on both: held by the paused push stream, not yet polled.
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

	b := newStaffBrowser(t, in.URL)
	b.signIn("tina@tax.example")
	p := b.get("/console/streams")
	if p.Status != 200 || !strings.Contains(p.Body, `href="/console/streams"`) {
		t.Fatalf("the streams page: %d\n%s", p.Status, p.Body)
	}
	for _, c := range []struct{ id, want string }{
		{push.StreamID, `(?s)push.*paused</span>.*: receiver maintenance.*stream-pending">1<.*waiting \d+s`},
		{poll.StreamID, `(?s)poll.*/ssf/poll/` + poll.StreamID + `.*enabled</span>.*stream-pending">1<.*waiting \d+s`},
	} {
		row := regexp.MustCompile(`(?s)<tr data-stream="` + c.id + `">.*?</tr>`).FindString(p.Body)
		if !regexp.MustCompile(c.want).MatchString(row) {
			t.Errorf("the row of stream %s does not match %s:\n%s", c.id, c.want, row)
		}
	}

	// Once polled and acknowledged, the poll stream holds nothing.
	var got pollAnswer
	call(t, holder, "POST", in.URL+"/ssf/poll/"+poll.StreamID, `{"returnImmediately":true}`, &got)
	for jti := range got.SETs {
		call(t, holder, "POST", in.URL+"/ssf/poll/"+poll.StreamID, `{"ack":["`+jti+`"],"maxEvents":0,"returnImmediately":true}`, nil)
	}
	p = b.get("/console/streams")
	row := regexp.MustCompile(`(?s)<tr data-stream="` + poll.StreamID + `">.*?</tr>`).FindString(p.Body)
	if !regexp.MustCompile(`(?s)stream-pending">0<.*none`).MatchString(row) {
		t.Errorf("after the ack, the poll stream's row:\n%s", row)
	}

	// The bank's staff see no stream of the tax office's.
	other := newStaffBrowser(t, in.URL)
	other.signIn("ada@acme.example")
	if p := other.get("/console/streams"); !strings.Contains(p.Body, "No streams are open") || strings.Contains(p.Body, push.StreamID) {
		t.Errorf("another organization's streams page:\n%s", p.Body)
	}
}
