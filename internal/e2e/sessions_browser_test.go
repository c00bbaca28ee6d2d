package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/testkit/browsertest"
)

// TestSessionsPageInABrowser: an admin signed in in two browsers sees both
// sign-ins on the sessions page, this browser's marked, and ends the other
// from here; the other browser's next page is the sign-in form. The admin
// then ends the viewer's session from everyone's sessions, and signs out
// everywhere else; each end is in the audit log.
func TestSessionsPageInABrowser(t *testing.T) {
	t.Parallel()
	e := startConsole(t)
	base := e.in.URL
	here := browsertest.New(t, browsertest.Desktop)
	there := browsertest.New(t, browsertest.Desktop)
	viewer := browsertest.New(t, browsertest.Desktop)
	shot := func(name string) { here.Screenshot("desktop-sessions-" + name) }
	signInBrowser(t, here, base, "ada@acme.example", nil)
	signInBrowser(t, there, base, "ada@acme.example", nil)
	signInBrowser(t, viewer, base, "vic@acme.example", nil)

	navigate(t, here, base+"/console/flows")
	clickTo(t, here, `nav a[href="/console/sessions"]`, "/console/sessions")
	wantText(t, here, "Your sessions", "this browser", "on Linux", "Everyone's sessions", "vic@acme.example")
	var own int
	here.Run(chromedp.Evaluate(`document.querySelectorAll("#your-sessions tr[data-session]").length`, &own))
	if own != 4 {
		t.Fatalf("%d of ada's sessions listed, want two sign-ins' console and provider sessions:\n%s", own, here.Text())
	}
	shot("01-sessions")

	// End the other browser's console session: the first End link of ada's own table.
	clickTo(t, here, `#your-sessions a.danger-link`, "/end")
	wantText(t, here, "End this session?", "on Linux")
	shot("02-confirm")
	clickTo(t, here, `form[action$="/end"] button[type=submit]`, "notice=session_ended")
	wantText(t, here, "A session of ada@acme.example was ended")
	shot("03-ended")
	var left int
	here.Run(chromedp.Evaluate(`document.querySelectorAll("#your-sessions tr[data-session]").length`, &left))
	if left != 2 {
		t.Fatalf("%d of ada's sessions left, want this browser's two:\n%s", left, here.Text())
	}

	// The other browser's next page load goes to sign-in, and the password is asked again.
	navigate(t, there, base+"/console/flows")
	there.Await("the sign-in form", browsertest.Selector("#password"))
	if loc := there.Location(); !strings.Contains(loc, "/idp/login") {
		t.Fatalf("the ended browser is at %s", loc)
	}
	there.Screenshot("desktop-sessions-04-other-browser-signed-out")

	// Signed in there again, "sign out everywhere else" here ends it again
	// and leaves this browser signed in.
	signInBrowser(t, there, base, "ada@acme.example", nil)
	navigate(t, here, base+"/console/sessions")
	clickTo(t, here, `#end-others`, "/console/sessions/others/end")
	wantText(t, here, "Sign out everywhere else?")
	clickTo(t, here, `form[action="/console/sessions/others/end"] button[type=submit]`, "notice=others_ended")
	wantText(t, here, "Every other session of yours was ended")
	navigate(t, there, base+"/console/flows")
	there.Await("the sign-in form", browsertest.Selector("#password"))

	// Everyone's sessions: the admin ends all of the viewer's.
	clickTo(t, here, `a[data-person="vic@acme.example"]`, "/end-all")
	wantText(t, here, "End every session of vic@acme.example?")
	clickTo(t, here, `form[action$="/end-all"] button[type=submit]`, "notice=sessions_ended")
	wantText(t, here, "Every session of vic@acme.example was ended")
	navigate(t, viewer, base+"/console/flows")
	viewer.Await("the sign-in form", browsertest.Selector("#password"))
	navigate(t, here, base+"/console/flows")
	wantText(t, here, "Sign out")

	navigate(t, here, base+"/console/audit")
	wantText(t, here, "session.end", "ended by its owner from another session", "ended by an admin")
	shot("05-audit")
}
