package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/internal/testkit/browsertest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// acceptIn answers a consent link with Accept in the browser, signing in
// first when the page asks for it.
func acceptIn(t *testing.T, e *consentEnv, link, nationalID, level string) {
	t.Helper()
	ctx := e.b.Ctx
	run(t, ctx, chromedp.Navigate(link+"?lang=en"))
	p := waitPage(t, ctx, "")
	if strings.Contains(p.text, "Continue with electronic ID") {
		signInAt(t, e, nationalID, level)
	}
	waitPage(t, ctx, "Do you consent?")
	run(t, ctx, chromedp.Click(`button[value=accept]`, chromedp.ByQuery))
	waitPage(t, ctx, "Back at Acme Bank")
}

// myWidth is how wide the page is laid out, with every details element open.
func myWidth(t *testing.T, ctx context.Context) int {
	t.Helper()
	var w int
	run(t, ctx, chromedp.Evaluate(`document.querySelectorAll("details").forEach(d => d.open = true); document.documentElement.scrollWidth`, &w))
	return w
}

func TestMyConsentsInABrowser(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t)
	ctx := e.b.Ctx
	other, otherAPI := createOrgAndClient(t, e.in, "Nordic Insurance", "NORD")
	otherHooks := newReceiver(t, other.WebhookSecret)

	// Acme's definition says what withdrawing means; another needs "high".
	withConsequences := strings.TrimSuffix(mortgageDefinition("substantial"), "}") +
		`,"withdrawalConsequences":{"en":"Acme Bank can no longer assess your mortgage.","nb":"Acme Bank kan ikke lenger vurdere boliglånet."}}`
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flow-definitions", withConsequences, nil); resp.StatusCode != 201 {
		t.Fatalf("create definition: %d", resp.StatusCode)
	}
	high := strings.Replace(mortgageDefinition("high"), "mortgage-data-sharing", "pension-transfer", 1)
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flow-definitions", high, nil); resp.StatusCode != 201 {
		t.Fatalf("create definition: %d", resp.StatusCode)
	}
	accepted := e.flowOn(t, "mortgage-data-sharing", 0)
	unanswered := e.createFlow(t, true)
	needsHigh := e.flowOn(t, "pension-transfer", 0)
	// The other organization writes the same national id another way.
	var atOther createdFlow
	if resp := call(t, otherAPI, "POST", e.in.URL+"/api/flows", `{"nationalId":"123456-78901","lastName":"Nordmann",`+
		`"redirectUrl":"`+e.site.srv.URL+`/done","webhookUrl":"`+otherHooks.srv.URL+`/hooks"}`, &atOther); resp.StatusCode != 201 {
		t.Fatalf("create at the other organization: %d", resp.StatusCode)
	}
	var someoneElses createdFlow
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flows", `{"nationalId":"`+wrongID+`","lastName":"Hansen",`+
		`"redirectUrl":"`+e.site.srv.URL+`/done"}`, &someoneElses); resp.StatusCode != 201 {
		t.Fatalf("create someone else's: %d", resp.StatusCode)
	}

	// The person accepts at both organizations, signed in at substantial.
	acceptIn(t, e, accepted.Links.Consent.Href, rightID, "substantial")
	acceptIn(t, e, atOther.Links.Consent.Href, rightID, "substantial")

	// Acme records a use of its consent; the person sees it.
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flows/"+accepted.FlowID+"/uses", `{"action":"fetched income 2025"}`, nil); resp.StatusCode != 201 {
		t.Fatalf("record a use: %d", resp.StatusCode)
	}

	// Every consent page links to the person's own page.
	run(t, ctx, chromedp.Navigate(accepted.Links.Consent.Href+"?lang=en"))
	waitPage(t, ctx, "You accepted this request")
	run(t, ctx, chromedp.Click(`a.my-link`, chromedp.ByQuery))
	p := waitPage(t, ctx, "Every consent request addressed to you")
	for _, want := range []string{"Share your income with Acme Bank", "Acme Bank", "Nordic Insurance",
		accepted.ReferenceID, atOther.ReferenceID, unanswered.ReferenceID, "Waiting for your answer",
		"Answer the request", "expires in 90 days", "No use recorded", "Used: fetched income 2025", "Asked", "You consented",
		"requires an electronic ID at level high"} {
		if !strings.Contains(p.text, want) {
			t.Errorf("/my lacks %q:\n%s", want, p.text)
		}
	}
	for _, unwanted := range []string{someoneElses.ReferenceID, needsHigh.ReferenceID} {
		if strings.Contains(p.text, unwanted) {
			t.Errorf("/my shows %q:\n%s", unwanted, p.text)
		}
	}
	var answerLink string
	run(t, ctx, chromedp.AttributeValue(`#consent-`+unanswered.FlowID+` a.button`, "href", &answerLink, nil, chromedp.ByQuery))
	if answerLink != unanswered.Links.Consent.Href {
		t.Errorf("the unanswered request links to %q, want its consent link", answerLink)
	}
	e.b.CheckAccessibility("/my")
	if w := myWidth(t, ctx); w > 390 {
		t.Errorf("/my is %d px wide on a 390 px screen", w)
	}
	shot(t, ctx, "my-consents")

	// A receipt downloads as a JWS, which the verify page finds genuine.
	var download string
	run(t, ctx, chromedp.AttributeValue(`#consent-`+accepted.FlowID+` a.receipt-download`, "href", &download, nil, chromedp.ByQuery))
	jws, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(download, "data:application/jwt;base64,"))
	if err != nil || strings.Count(string(jws), ".") != 2 {
		t.Fatalf("the receipt's download is not a JWS: %q", download)
	}
	browsertest.Navigate(t, ctx, e.in.URL+"/receipts/verify?lang=en")
	run(t, ctx, chromedp.SetValue(`#receipt`, string(jws), chromedp.ByQuery), chromedp.Click(`form.verify button`, chromedp.ByQuery))
	waitPage(t, ctx, "This receipt is genuine")
	if w := myWidth(t, ctx); w > 390 {
		t.Errorf("a verified receipt is %d px wide on a 390 px screen", w)
	}

	// Withdrawing asks first, saying what it means.
	run(t, ctx, chromedp.Navigate(e.in.URL+"/my"))
	waitPage(t, ctx, "Every consent request addressed to you")
	run(t, ctx, chromedp.Click(`#consent-`+accepted.FlowID+` a.my-withdraw`, chromedp.ByQuery))
	p = waitPage(t, ctx, "Withdraw your consent?")
	if !strings.Contains(p.text, "Acme Bank can no longer assess your mortgage.") {
		t.Errorf("the confirmation lacks the definition's consequences:\n%s", p.text)
	}
	e.b.CheckAccessibility("the withdrawal's confirmation")
	run(t, ctx, chromedp.Click(`form.withdraw button[type=submit]`, chromedp.ByQuery))
	p = waitPage(t, ctx, "Your consent is withdrawn")
	if !strings.Contains(p.text, "Download") {
		t.Errorf("the withdrawal's page offers no receipt:\n%s", p.text)
	}
	if got := e.flow(t, accepted.FlowID).Flow.Consent.Status; got != "Withdrawn" {
		t.Errorf("the flow is %s after the withdrawal", got)
	}
	testwait.For(t, "Acme to receive flow.withdrawn", func() (bool, string) {
		got := e.hooks.eventTypes()
		return slices.Contains(got, "flow.withdrawn"), fmt.Sprintf("%v", got)
	})
	if slices.Contains(otherHooks.eventTypes(), "flow.withdrawn") {
		t.Error("the other organization was told of a withdrawal")
	}
	// A use after the withdrawal is refused.
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flows/"+accepted.FlowID+"/uses", `{"action":"fetched income 2026"}`, nil); resp.StatusCode != 409 {
		t.Errorf("a use after the withdrawal: %d, want 409", resp.StatusCode)
	}

	// Each view and the withdrawal are in the audit log of each
	// organization concerned, by reference, never naming the person.
	conn, err := pgx.Connect(context.Background(), e.in.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, c := range []struct{ org, action, target string }{
		{e.org.ID, "person_page.viewed", accepted.ReferenceID},
		{other.ID, "person_page.viewed", atOther.ReferenceID},
		{e.org.ID, "person_page.withdrawal", accepted.ReferenceID},
	} {
		var n int
		if err := conn.QueryRow(context.Background(), `select count(*) from audit_log where organization_id = $1
			and action = $2 and position($3 in target) > 0 and target not like '%'||$4||'%'`,
			c.org, c.action, c.target, rightID).Scan(&n); err != nil || n == 0 {
			t.Errorf("no %s of %s in the audit log of %s (%v)", c.action, c.target, c.org, err)
		}
	}
	var leaked int
	if err := conn.QueryRow(context.Background(), `select count(*) from audit_log where organization_id = $1
		and action like 'person_page.%' and target like '%'||$2||'%'`, other.ID, accepted.ReferenceID).Scan(&leaked); err != nil || leaked != 0 {
		t.Errorf("the other organization's audit log names Acme's flow: %d, %v", leaked, err)
	}

	// Someone else sees none of the person's consents: only their own.
	e.fresh(t)
	run(t, ctx, chromedp.Navigate(e.in.URL+"/my?lang=en"))
	waitPage(t, ctx, "Sign in with electronic ID")
	signInAt(t, e, wrongID, "substantial")
	p = waitPage(t, ctx, "Every consent request addressed to you")
	if !strings.Contains(p.text, someoneElses.ReferenceID) {
		t.Errorf("the other person does not see their own request:\n%s", p.text)
	}
	for _, unwanted := range []string{accepted.ReferenceID, atOther.ReferenceID, unanswered.ReferenceID, "Nordic Insurance", "level high"} {
		if strings.Contains(p.text, unwanted) {
			t.Errorf("the other person's /my shows %q:\n%s", unwanted, p.text)
		}
	}
}

// TestMyConsentsPageInNorwegian: the page speaks Norwegian, and a
// definition without consequences of its own shows the default.
func TestMyConsentsPageInNorwegian(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t)
	ctx := e.b.Ctx
	c := e.createFlow(t, false)
	acceptIn(t, e, c.Links.Consent.Href, rightID, "substantial")
	run(t, ctx, chromedp.Navigate(e.in.URL+"/my?lang=nb"))
	p := waitPage(t, ctx, "Mine samtykker")
	for _, want := range []string{"Alle samtykkeforespørsler til deg", c.ReferenceID, "Du samtykket", "Trekk tilbake samtykket"} {
		if !strings.Contains(p.text, want) {
			t.Errorf("/my in Norwegian lacks %q:\n%s", want, p.text)
		}
	}
	run(t, ctx, chromedp.Click(`a.my-withdraw`, chromedp.ByQuery))
	p = waitPage(t, ctx, "Trekke tilbake samtykket?")
	if !strings.Contains(p.text, "Du kan når som helst trekke samtykket tilbake.") {
		t.Errorf("the confirmation lacks the default consequences:\n%s", p.text)
	}
	var lang string
	run(t, ctx, chromedp.AttributeValue(`html`, "lang", &lang, nil, chromedp.ByQuery))
	if lang != "nb" {
		t.Errorf("html lang = %q", lang)
	}
	e.b.CheckAccessibility("/my in Norwegian")
}

// TestMyWithdrawalNeedsItsLevelAndTheForm: a withdrawal from /my needs the
// session's form token and a sign-in at the consent's level; a weaker
// sign-in lists the consent without its details, and a flow of someone
// else's cannot be withdrawn by its id.
func TestMyWithdrawalNeedsItsLevelAndTheForm(t *testing.T) {
	t.Parallel()
	e := newConsentEnv(t)
	ctx := e.b.Ctx
	high := strings.Replace(mortgageDefinition("high"), "mortgage-data-sharing", "pension-transfer", 1)
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flow-definitions", high, nil); resp.StatusCode != 201 {
		t.Fatalf("create definition: %d", resp.StatusCode)
	}
	f := e.flowOn(t, "pension-transfer", 0)
	var someoneElses createdFlow
	if resp := call(t, e.api, "POST", e.in.URL+"/api/flows", `{"nationalId":"`+wrongID+`","lastName":"Hansen",`+
		`"redirectUrl":"`+e.site.srv.URL+`/done"}`, &someoneElses); resp.StatusCode != 201 {
		t.Fatalf("create someone else's: %d", resp.StatusCode)
	}
	acceptIn(t, e, f.Links.Consent.Href, rightID, "high")
	withdraw := e.in.URL + "/my/" + f.FlowID + "/withdraw"

	run(t, ctx, chromedp.Navigate(withdraw+"?lang=en"))
	waitPage(t, ctx, "Withdraw your consent?")
	var token string
	run(t, ctx, chromedp.Value(`form.withdraw input[name=csrf]`, &token, chromedp.ByQuery))
	cookies := e.cookieHeader(t)
	if resp, body := e.post(t, withdraw, url.Values{}, cookies, e.sameOrigin()...); resp.StatusCode != 403 ||
		!strings.Contains(body, "The form has expired") {
		t.Errorf("a withdrawal without the form's token: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := e.post(t, withdraw, url.Values{"csrf": {"not-the-token"}}, cookies, e.sameOrigin()...); resp.StatusCode != 403 {
		t.Errorf("a withdrawal with a wrong token: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := e.post(t, e.in.URL+"/my/"+someoneElses.FlowID+"/withdraw", url.Values{"csrf": {token}}, cookies,
		e.sameOrigin()...); resp.StatusCode != 404 {
		t.Errorf("a withdrawal of someone else's flow: %d\n%s", resp.StatusCode, body)
	}
	if got := e.flow(t, f.FlowID).Flow.Consent.Status; got != "Accepted" {
		t.Fatalf("the consent is %s after refused withdrawals", got)
	}

	// Signed in again at substantial, the consent is listed without its
	// details, and withdrawing it asks for the stronger eID.
	browsertest.Navigate(t, ctx, e.in.URL+"/my/login?again=1")
	browsertest.Await(t, ctx, "the test eID's form", browsertest.Selector("#national_id"))
	run(t, ctx, chromedp.SetValue(`#national_id`, rightID, chromedp.ByQuery),
		chromedp.Click(`input[name=level][value=substantial]`, chromedp.ByQuery),
		chromedp.Click(`form button[type=submit]`, chromedp.ByQuery))
	p := waitPage(t, ctx, "Every consent request addressed to you")
	if !strings.Contains(p.text, "requires an electronic ID at level high") {
		t.Errorf("the consent needing high is not listed as hidden:\n%s", p.text)
	}
	for _, unwanted := range []string{f.ReferenceID, "Share your income", "Acme Bank ASA"} {
		if strings.Contains(p.text, unwanted) {
			t.Errorf("a substantial sign-in sees %q of a consent needing high:\n%s", unwanted, p.text)
		}
	}
	var stronger string
	run(t, ctx, chromedp.AttributeValue(`.my-hidden a.button`, "href", &stronger, nil, chromedp.ByQuery))
	if !strings.Contains(stronger, "level=high") {
		t.Errorf("the stronger sign-in link is %q", stronger)
	}
	e.b.CheckAccessibility("/my with a hidden consent")
	run(t, ctx, chromedp.Value(`form.signout input[name=csrf]`, &token, chromedp.ByQuery))
	cookies = e.cookieHeader(t)
	if resp, body := e.post(t, withdraw, url.Values{"csrf": {token}}, cookies, e.sameOrigin()...); resp.StatusCode != 403 ||
		!strings.Contains(body, "A stronger electronic ID is needed") {
		t.Errorf("a withdrawal at substantial of a consent needing high: %d\n%s", resp.StatusCode, body)
	}
	if got := e.flow(t, f.FlowID).Flow.Consent.Status; got != "Accepted" {
		t.Fatalf("the consent is %s after a withdrawal below its level", got)
	}
}
