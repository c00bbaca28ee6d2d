package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/testkit/testwait"
)

// This file is how a test waits for what a tab shows. Polling the page
// from Go costs the browser a third of a core for as long as it polls, and
// a loaded machine makes the wait, and so the polling, longer: a wait here
// is one promise in the page, which a MutationObserver and the document's
// readystatechange settle once the condition holds, asked again only when
// a navigation ends the document it waited in.

// Page is what a tab shows: its address and visible text.
type Page struct{ URL, Text string }

// awaitScript is a promise that settles, once the document is loaded and the
// JavaScript condition %s holds, to the page's address and visible text.
const awaitScript = `new Promise(resolve => {
	const check = () => {
		if (document.readyState === "complete" && document.body && (%s)) {
			observer.disconnect();
			resolve([location.href, document.body.innerText]);
		}
	};
	const observer = new MutationObserver(check);
	observer.observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
	document.addEventListener("readystatechange", check);
	check();
})`

// snapshotScript is what a tab shows now, for a wait's failure message.
const snapshotScript = `[location.href, document.body ? document.body.innerText : "(no body yet)"]`

// askAgain bounds one promise's wait: a navigation normally ends it sooner,
// and this is the backstop should a document end without saying so.
const askAgain = 10 * time.Second

// Await waits until the tab of ctx shows a loaded page on which the
// JavaScript expression cond is true, and returns that page; what names the
// wait in the failure, which shows the page the tab showed last.
func Await(t testing.TB, ctx context.Context, what, cond string) Page {
	t.Helper()
	deadline := testwait.Deadline(t)
	script := fmt.Sprintf(awaitScript, cond)
	for {
		wait := min(askAgain, time.Until(deadline))
		c, cancel := context.WithTimeout(ctx, max(wait, 0))
		var res []string
		err := chromedp.Run(c, chromedp.Evaluate(script, &res, awaitPromise))
		cancel()
		if err == nil && len(res) == 2 {
			return Page{URL: res[0], Text: res[1]}
		}
		if time.Now().After(deadline) {
			last := Snapshot(ctx)
			t.Fatalf("waited for %s; the tab shows %s:\n%s", what, last.URL, last.Text)
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
		if c.Err() == nil {
			// The document went away under the promise: the next one
			// is there a moment later.
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Snapshot returns what the tab of ctx shows now, or what kept it from saying.
func Snapshot(ctx context.Context) Page {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var res []string
	if err := chromedp.Run(c, chromedp.Evaluate(snapshotScript, &res)); err != nil || len(res) != 2 {
		return Page{URL: "(unknown)", Text: fmt.Sprintf("(the tab did not answer: %v)", err)}
	}
	return Page{URL: res[0], Text: res[1]}
}

func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

// JS quotes s as a JavaScript string literal.
func JS(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TextHas is the condition that the page's visible text contains want.
func TextHas(want string) string { return "document.body.innerText.includes(" + JS(want) + ")" }

// WaitPage waits until the tab of ctx shows a loaded page whose text
// contains want; navigations in between are expected.
func WaitPage(t testing.TB, ctx context.Context, want string) Page {
	t.Helper()
	return Await(t, ctx, fmt.Sprintf("a page that says %q", want), TextHas(want))
}

// ClickTo clicks sel in the tab of ctx and waits until a new page has loaded
// at an address that contains wantURL.
func ClickTo(t testing.TB, ctx context.Context, sel, wantURL string) Page {
	t.Helper()
	return ClickAndAwait(t, ctx, sel, fmt.Sprintf("a page at %q", wantURL), "location.href.includes("+JS(wantURL)+")")
}

// ClickAndAwait clicks sel in the tab of ctx and waits until a new page has
// loaded on which the JavaScript condition cond holds.
func ClickAndAwait(t testing.TB, ctx context.Context, sel, what, cond string) Page {
	t.Helper()
	// The old page is marked, so that only a page loaded after the click
	// counts, even one at the same address, and it notes whether a click
	// reached it.
	run(t, ctx, chromedp.Evaluate(markClick, nil))
	deadline := testwait.Deadline(t)
	for {
		// The click's page may navigate before chromedp is done with it, so
		// its error says nothing; on a busy machine chromedp may also give
		// up before the click is made, which the old page tells: that click
		// is made again rather than waited for until the deadline.
		c, cancel := context.WithTimeout(ctx, askAgain)
		_ = chromedp.Run(c, chromedp.Click(sel, chromedp.ByQuery, chromedp.NodeVisible))
		cancel()
		if !clickLost(ctx) || time.Now().After(deadline) {
			break
		}
	}
	return Await(t, ctx, fmt.Sprintf("%s after clicking %s", what, sel), "window.flowdStale !== true && ("+cond+")")
}

// markClick marks the tab's page as the one before a click, and notes on it
// whether any click reaches it.
const markClick = `window.flowdStale = true; window.flowdClicked = false;
document.addEventListener("click", function () { window.flowdClicked = true }, {capture: true, once: true})`

// clickLost reports whether the tab of ctx still shows the page markClick
// marked, and no click reached it. A page it cannot ask (one that is
// navigating away) has had its click.
func clickLost(ctx context.Context) bool {
	c, cancel := context.WithTimeout(ctx, askAgain)
	defer cancel()
	var lost bool
	err := chromedp.Run(c, chromedp.Evaluate(`window.flowdStale === true && window.flowdClicked === false`, &lost))
	return err == nil && lost
}

// Navigate opens u in the tab of ctx and waits until its page has loaded.
func Navigate(t testing.TB, ctx context.Context, u string) Page {
	t.Helper()
	run(t, ctx, chromedp.Evaluate(`window.flowdStale = true`, nil))
	// Navigate returns once the page's load event fired, or with an error
	// when the page it loads answers with an error page; the wait below
	// decides.
	c, cancel := context.WithTimeout(ctx, askAgain)
	_ = chromedp.Run(c, chromedp.Navigate(u))
	cancel()
	return Await(t, ctx, "the page of "+u, "window.flowdStale !== true")
}

func run(t testing.TB, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := context.WithDeadline(ctx, testwait.Deadline(t))
	defer cancel()
	if err := chromedp.Run(c, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// Selector is the condition that an element matching the CSS selector sel is in the page.
func Selector(sel string) string { return "document.querySelector(" + JS(sel) + ") !== null" }

// Count returns how many elements of the page in the tab of ctx match sel.
func Count(t testing.TB, ctx context.Context, sel string) int {
	t.Helper()
	var n int
	run(t, ctx, chromedp.Evaluate("document.querySelectorAll("+JS(sel)+").length", &n))
	return n
}

// Has reports whether the page's text contains every one of want.
func (p Page) Has(want ...string) bool {
	for _, w := range want {
		if !strings.Contains(p.Text, w) {
			return false
		}
	}
	return true
}

// Methods of Browser for the same, in its tab.

// Await waits until the page satisfies cond; see Await.
func (b *Browser) Await(what, cond string) Page { b.t.Helper(); return Await(b.t, b.Ctx, what, cond) }

// WaitPage waits until the page's text contains want.
func (b *Browser) WaitPage(want string) Page { b.t.Helper(); return WaitPage(b.t, b.Ctx, want) }

// ClickTo clicks sel and waits for a new page at an address containing wantURL.
func (b *Browser) ClickTo(sel, wantURL string) Page {
	b.t.Helper()
	return ClickTo(b.t, b.Ctx, sel, wantURL)
}

// Navigate opens u and waits for its page.
func (b *Browser) Navigate(u string) Page { b.t.Helper(); return Navigate(b.t, b.Ctx, u) }
