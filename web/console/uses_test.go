package console_test

import (
	"context"
	"fmt"
	"html"
	"strings"
	"testing"

	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/web/internal/webtest"
)

// TestTheFlowPageListsTheConsentsUses: the flow page counts the uses,
// lists the latest twenty, latest first, and pages to the older ones and
// back; another organization's staff cannot see them.
func TestTheFlowPageListsTheConsentsUses(t *testing.T) {
	t.Parallel()
	ls := webtest.SetupLogin(t, webtest.LoginOptions{})
	s := ls.SignInStaffPair(t, "Ledger Bank", "LED")
	webtest.CreateTestEvents(t, ls.Pool)
	ctx := context.Background()
	caller := flows.Caller{OrganizationID: s.Org.ID, ClientID: "client-l"}
	created, err := ls.Flows.Create(ctx, caller, flows.NewFlow{NationalID: "ID-77", LastName: "Nordmann", RedirectURL: "https://bank.example/done"})
	if err != nil {
		t.Fatal(err)
	}
	// Accepted as the consent module would record it; the journey is tested elsewhere.
	if _, err := ls.Pool.Exec(ctx, `update flows set consent_status = 'Accepted', process_status = 'completed', decided_at = now() - interval '1 hour'
		where id = $1`, created.FlowID); err != nil {
		t.Fatal(err)
	}
	const n = 23
	for i := range n {
		if _, err := ls.Flows.RecordUse(ctx, caller, created.FlowID, flows.NewUse{Action: fmt.Sprintf("fetched <income> %02d", i), Reference: "case 4711"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	page := "/console/flows/" + created.FlowID
	p := s.Admin.Get(ls.URL + page)
	body := html.UnescapeString(p.Body)
	if !strings.Contains(body, "Uses recorded") || !strings.Contains(body, ">23<") || !strings.Contains(body, "case 4711") || !strings.Contains(body, "client-l") {
		t.Fatalf("the flow page does not count and show the uses: %s", p.Body)
	}
	if strings.Contains(p.Body, "<income>") {
		t.Fatal("a use's action is not escaped")
	}
	shown := func(body string) []string {
		var out []string
		for i := range n {
			if strings.Contains(body, fmt.Sprintf("fetched <income> %02d", i)) {
				out = append(out, fmt.Sprintf("%02d", i))
			}
		}
		return out
	}
	if got := shown(body); len(got) != 20 || got[0] != "03" || got[19] != "22" || strings.Contains(body, "Latest uses") {
		t.Fatalf("the first page shows uses %v", got)
	}
	at := strings.Index(body, `Older uses →`)
	if at < 0 {
		t.Fatalf("no link to the older uses: %s", p.Body)
	}
	link := body[strings.LastIndex(body[:at], `href="`)+len(`href="`):]
	link = link[:strings.Index(link, `"`)]
	older := html.UnescapeString(s.Admin.Get(ls.URL + link).Body)
	if got := shown(older); strings.Join(got, ",") != "00,01,02" || !strings.Contains(older, "Latest uses") || strings.Contains(older, "Older uses") {
		t.Fatalf("the older page (%s) shows uses %v", link, got)
	}
	if p := s.Viewer.Get(ls.URL + page); !strings.Contains(html.UnescapeString(p.Body), "fetched <income> 22") {
		t.Fatal("a viewer does not see the uses")
	}
}
