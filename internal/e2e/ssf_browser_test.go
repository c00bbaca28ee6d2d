package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/browsertest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// TestAWithdrawalOnMyReachesTheDataHolders: the tax authority, whose
// resource the bank's consent names, listens on a push stream (a receiver
// of the test's own, checking each SET with the published keys) and a poll
// stream. The person withdraws the consent on /my in the browser; the push
// receiver hears of it at once, the poll receiver finds it and
// acknowledges it, and /my then shows the tax authority told on both
// streams, and each acknowledgement.
func TestAWithdrawalOnMyReachesTheDataHolders(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t, flowdtest.WithEnv("FLOWD_ALLOW_INSECURE_URLS", "true"))
	ctx := e.b.Ctx
	ct := newConsentTokenEnv(t, e.in)
	ct.redirectURL = e.site.srv.URL + "/done"
	taxAPI := ct.apiOf(t, ct.tax)

	recv := newSETReceiver(t, e.in.URL+"/oauth/jwks")
	var push, poll streamJSON
	if resp := call(t, taxAPI, "POST", e.in.URL+"/ssf/streams", `{"delivery":{"method":"urn:ietf:rfc:8935","endpoint_url":"`+recv.srv.URL+`/ssf"},
		"events_requested":["`+consentRevoked+`"]}`, &push); resp.StatusCode != 201 {
		t.Fatalf("push stream: %d %+v", resp.StatusCode, push)
	}
	if resp := call(t, taxAPI, "POST", e.in.URL+"/ssf/streams", `{"delivery":{"method":"urn:ietf:rfc:8936"},
		"events_requested":["`+consentRevoked+`"]}`, &poll); resp.StatusCode != 201 {
		t.Fatalf("poll stream: %d %+v", resp.StatusCode, poll)
	}

	f := ct.flow(t)
	acceptIn(t, e, f.Links.Consent.Href, rightID, "substantial")
	browsertest.Navigate(t, ctx, e.in.URL+"/my?lang=en")
	waitPage(t, ctx, "Every consent request addressed to you")
	run(t, ctx, chromedp.Click(`#consent-`+f.FlowID+` a.my-withdraw`, chromedp.ByQuery))
	waitPage(t, ctx, "Withdraw your consent?")
	run(t, ctx, chromedp.Click(`form.withdraw button[type=submit]`, chromedp.ByQuery))
	waitPage(t, ctx, "Your consent is withdrawn")

	// The push receiver hears of it, by the person.
	set := recv.await(t, consentRevoked, f.FlowID)
	checkRevokedByPerson(t, "the pushed SET", set, e.in.URL, push.Aud)

	// The poll receiver finds it, checks it and acknowledges it.
	var got pollAnswer
	if resp := call(t, taxAPI, "POST", e.in.URL+"/ssf/poll/"+poll.StreamID, `{"returnImmediately":true}`, &got); resp.StatusCode != 200 ||
		len(got.SETs) != 1 || got.MoreAvailable {
		t.Fatalf("the poll: %d %+v, want the withdrawal's SET alone", resp.StatusCode, got)
	}
	for jti, token := range got.SETs {
		claims, err := recv.verify(token)
		if err != nil || claims["jti"] != jti || subjectOf(claims) != f.FlowID {
			t.Fatalf("the polled SET %v (%v), want the withdrawal's under its jti %s", claims, err, jti)
		}
		checkRevokedByPerson(t, "the polled SET", claims, e.in.URL, poll.Aud)
		if resp := call(t, taxAPI, "POST", e.in.URL+"/ssf/poll/"+poll.StreamID, `{"ack":["`+jti+`"],"maxEvents":0,"returnImmediately":true}`,
			nil); resp.StatusCode != 200 {
			t.Fatalf("the ack: %d", resp.StatusCode)
		}
	}
	var after pollAnswer
	if call(t, taxAPI, "POST", e.in.URL+"/ssf/poll/"+poll.StreamID, `{"returnImmediately":true}`, &after); len(after.SETs) != 0 {
		t.Errorf("a poll after the ack: %+v, want nothing", after)
	}

	// /my shows the tax authority told on each stream, and acknowledged;
	// the push stream's acknowledgement is recorded as its 202 comes back,
	// so the page is read again until it shows both.
	card := `#consent-` + f.FlowID + ` ul.ssf-notices li[data-notice="Tax Authority"]`
	var p browsertest.Page
	testwait.For(t, "/my to show the tax authority's two acknowledgements", func() (bool, string) {
		p = browsertest.Navigate(t, ctx, e.in.URL+"/my?lang=en")
		told, acked := browsertest.Count(t, ctx, card), browsertest.Count(t, ctx, card+` span.acknowledged`)
		return told == 2 && acked == 2, fmt.Sprintf("%d notices, %d acknowledged:\n%s", told, acked, p.Text)
	})
	for _, want := range []string{"Data holders told that the consent ended", "Tax Authority: told", "acknowledged"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("/my lacks %q:\n%s", want, p.Text)
		}
	}
	if strings.Contains(p.Text, "not yet acknowledged") {
		t.Errorf("/my still shows a notice not acknowledged:\n%s", p.Text)
	}
	e.b.CheckAccessibility("/my with the data holders told")
}

// checkRevokedByPerson checks that claims are a consent-revoked SET of
// iss for aud: withdrawn by the individual, with its time.
func checkRevokedByPerson(t *testing.T, what string, claims map[string]any, iss, aud string) {
	t.Helper()
	events, _ := claims["events"].(map[string]any)
	ev, _ := events[consentRevoked].(map[string]any)
	if ev["reason"] != "withdrawn" || ev["initiator"] != "individual" || ev["event_timestamp"] == nil {
		t.Errorf("%s: event %v, want reason withdrawn, initiator individual and event_timestamp", what, ev)
	}
	if claims["iss"] != iss || claims["aud"] != aud || claims["jti"] == nil || claims["iat"] == nil {
		t.Errorf("%s: claims %v, want iss %s, aud %s, jti and iat", what, claims, iss, aud)
	}
	if raw := fmt.Sprint(claims); strings.Contains(raw, rightID) || strings.Contains(raw, "Nordmann") {
		t.Errorf("%s carries personal data: %s", what, raw)
	}
}
