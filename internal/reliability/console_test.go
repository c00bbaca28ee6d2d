package reliability_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/formbrowser"
)

var hrefRE = regexp.MustCompile(`href="(/console[^"#]*)"`)

// TestConsoleShowsNoOtherOrganization signs a staff admin of one
// organization in and crawls every console page reachable by link. No page
// shows the other organization's flow, and every link that names one of its
// own flows, rewritten to name the other organization's flow, finds nothing.
// Crawling rather than listing pages keeps the test true as the console grows.
func TestConsoleShowsNoOtherOrganization(t *testing.T) {
	t.Parallel()
	p := startFlowd(t, dbtest.NewURL(t), "", nil)
	acme := newTenant(t, p.Env, "Acme Bank", "ACME")
	other := newTenant(t, p.Env, "Other Lender", "OTHR")
	mine, _ := createFlow(t, p.URL, acme.token(t, p.URL), "CON1", "")
	theirs, _ := createFlow(t, p.URL, other.token(t, p.URL), "CON2", "")
	if _, err := flowdtest.RunCLI(getenvOf(p.Env), "correct horse battery staple", "staff", "create", "--org", acme.OrgID,
		"--username", "admin@acme.example", "--role", "admin", "--password-stdin"); err != nil {
		t.Fatal(err)
	}
	b := formbrowser.New(t)
	b.Scope = p.URL
	form := b.Follow(http.MethodGet, p.URL+"/console", nil)
	if !strings.Contains(form.Body, `name="password"`) {
		t.Fatalf("no sign-in form: %d %.1000s", form.Status, form.Body)
	}
	v := form.HiddenFields(t)
	v.Set("username", "admin@acme.example")
	v.Set("password", "correct horse battery staple")
	home := b.Follow(http.MethodPost, p.URL+"/idp/login", v)
	if home.Status != 200 || !strings.HasPrefix(home.URL, p.URL+"/console") {
		t.Fatalf("after signing in: %d at %s", home.Status, home.URL)
	}

	seen := map[string]bool{"/console": true}
	queue := []formbrowser.Page{home}
	var ownLinks []string
	for len(queue) > 0 && len(seen) < 60 {
		pg := queue[0]
		queue = queue[1:]
		if strings.Contains(pg.Body, "OTHR-") || strings.Contains(pg.Body, theirs) {
			t.Errorf("%s shows the other organization's flow", pg.URL)
		}
		for _, m := range hrefRE.FindAllStringSubmatch(pg.Body, -1) {
			link := strings.ReplaceAll(m[1], "&amp;", "&")
			if seen[link] || strings.Contains(link, "/auth/") || strings.Contains(link, "logout") {
				continue
			}
			seen[link] = true
			if strings.Contains(link, mine) {
				ownLinks = append(ownLinks, link)
			}
			next := b.Get(p.URL + link)
			if next.Status >= 500 {
				t.Errorf("GET %s: %d", link, next.Status)
			}
			if next.Status == 200 {
				queue = append(queue, next)
			}
		}
	}
	t.Logf("crawled %d console pages; %d name the organization's own flow", len(seen), len(ownLinks))
	// The conventional address of a flow's page, whether or not a link led there.
	ownLinks = append(ownLinks, "/console/flows/"+mine)
	for _, link := range ownLinks {
		foreign := strings.ReplaceAll(link, mine, theirs)
		got := b.Get(p.URL + foreign)
		if got.Status != http.StatusNotFound {
			t.Errorf("GET %s (the other organization's flow): %d; want 404", foreign, got.Status)
		}
		if strings.Contains(got.Body, "OTHR-") {
			t.Errorf("GET %s shows the other organization's reference", foreign)
		}
	}
}
