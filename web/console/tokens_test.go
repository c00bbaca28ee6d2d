package console_test

import (
	"context"
	"html"
	"strings"
	"testing"

	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestTheFlowPageListsItsConsentTokens: the consent tokens issued for a
// flow (its uses with the action consent-token) are listed apart, each
// with its resource, when and to which client; other uses are not.
func TestTheFlowPageListsItsConsentTokens(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	s := ls.SignInStaffPair(t, "Token Bank", "TOK")
	webtest.CreateTestEvents(t, ls.Pool)
	ctx := context.Background()
	caller := flows.Caller{OrganizationID: s.Org.ID, ClientID: "client-t"}
	created, err := ls.Flows.Create(ctx, caller, flows.NewFlow{NationalID: "ID-78", LastName: "Nordmann", RedirectURL: "https://bank.example/done"})
	if err != nil {
		t.Fatal(err)
	}
	// Accepted as the consent module would record it; the journey is tested elsewhere.
	if _, err := ls.Pool.Exec(ctx, `update flows set consent_status = 'Accepted', process_status = 'completed', decided_at = now() - interval '1 hour'
		where id = $1`, created.FlowID); err != nil {
		t.Fatal(err)
	}
	page := "/console/flows/" + created.FlowID
	if body := s.Viewer.Get(ls.URL + page).Body; !strings.Contains(body, "Consent tokens issued") || !strings.Contains(body, "No consent token was issued") {
		t.Fatalf("the flow page does not say no token was issued: %s", body)
	}
	for _, u := range []flows.NewUse{
		{Action: flows.ActionConsentToken, Resource: "https://api.tax.example/income"},
		{Action: "fetched the balance", Reference: "case 12"},
	} {
		if _, err := ls.Flows.RecordUse(ctx, caller, created.FlowID, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	body := html.UnescapeString(s.Viewer.Get(ls.URL + page).Body)
	at := strings.Index(body, `id="consent-tokens"`)
	if at < 0 {
		t.Fatalf("no consent tokens section: %s", body)
	}
	section := body[at : strings.Index(body[at:], "<h2>Tasks")+at]
	if !strings.Contains(section, "https://api.tax.example/income") || !strings.Contains(section, "client-t") ||
		strings.Contains(section, "fetched the balance") || strings.Contains(section, "No consent token") {
		t.Fatalf("the consent tokens section: %s", section)
	}
}
