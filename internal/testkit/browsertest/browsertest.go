// Package browsertest drives Debian's headless Chromium through chromedp for
// the tests of flowd's pages.
//
// A test binary starts one Chromium, at the first New, and each New is a new
// tab in a browser context of its own: what an incognito window is, with its
// own cookies, cache and downloads. Starting Chromium costs a core for
// seconds and a browser context a second more, so a context a test is done
// with goes back to a pool with its cookies and cache cleared, and the next
// New opens its tab there: a fresh profile in everything a page can tell. Packages that use New
// call Main from their TestMain, which stops the browser at the end.
//
// Screenshots at phone width, for people to review how pages look, are
// taken only when FLOWD_TEST_SCREENSHOTS=1 (make screenshots): a full-page
// PNG costs the browser a second of CPU and asserts nothing.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/testkit/testwait"
)

// Phone is the viewport of the screenshots: a common phone in CSS pixels.
var Phone = Viewport{Width: 390, Height: 844, Scale: 2, Mobile: true}

// Desktop is a laptop-sized viewport.
var Desktop = Viewport{Width: 1280, Height: 900, Scale: 1}

// Viewport is a window size to emulate.
type Viewport struct {
	Width, Height int64
	Scale         float64
	Mobile        bool
}

// Browser is one tab in a browser context of its own.
type Browser struct {
	t   testing.TB
	Ctx context.Context
}

// browserContext is a browser context of the pool, with the blank tab that
// keeps a window open in it: a page opens in a new tab of a window only,
// and a tab costs the browser a quarter of what a new window does.
type browserContext struct {
	id     cdp.BrowserContextID
	anchor context.Context
	cancel context.CancelFunc
}

// chromium finds the browser: FLOWD_CHROMIUM, else chromium on PATH.
func chromium() (string, error) {
	if p := os.Getenv("FLOWD_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium not found: `make test` installs it with apt-get (apt-get install chromium), or set FLOWD_CHROMIUM")
}

// shared is the test binary's one Chromium and its idle tabs.
var shared struct {
	once    sync.Once
	err     error
	ctx     context.Context // the browser's own connection
	cancel  func()
	profile string

	mu   sync.Mutex
	idle []*browserContext
}

// start launches the shared Chromium with the flags this machine needs.
func start() error {
	path, err := chromium()
	if err != nil {
		return err
	}
	shared.profile, err = os.MkdirTemp("", "flowd-chromium-")
	if err != nil {
		return err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(shared.profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// Pages in a background tab must not be throttled: several tests
		// drive their tabs at once.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		// A loaded machine has taken longer than chromedp's 20 s default
		// to start Chromium.
		chromedp.WSURLReadTimeout(2 * time.Minute),
		chromedp.ModifyCmdFunc(withoutRaisedPriority),
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp gives up dialling the browser after 10 s by default, which a
	// loaded machine has taken; one failed start fails every browser test.
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithBrowserOption(chromedp.WithDialTimeout(2*time.Minute)))
	shared.ctx = ctx
	shared.cancel = func() { cancelCtx(); cancelAlloc() }
	// The first Run starts the browser; it must not carry a deadline, since
	// chromedp ends the browser with the context of its first Run.
	return chromedp.Run(ctx)
}

// withoutRaisedPriority starts Chromium unable to raise its own priority,
// which as root it does (its browser and GPU processes at nice -8): in a
// suite it shares two cores with PostgreSQL and the servers under test, and
// those must not wait behind it. Without setpriv it starts as it is.
func withoutRaisedPriority(cmd *exec.Cmd) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || os.Geteuid() != 0 {
		return
	}
	cmd.Args = append([]string{setpriv, "--inh-caps=-sys_nice", "--bounding-set=-sys_nice", "--"}, cmd.Args...)
	cmd.Path = setpriv
}

// Main runs the package's tests and then stops the shared Chromium and
// removes its profile; call it from TestMain: os.Exit(browsertest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.cancel != nil {
		shared.cancel()
	}
	if shared.profile != "" {
		removeAll(shared.profile)
	}
	return code
}

// removeAll removes dir, retrying while Chromium's helper processes, which
// outlive the browser by a moment, still write into it.
func removeAll(dir string) {
	for range 50 {
		if os.RemoveAll(dir) == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// New gives the test a browser of its own at viewport vp, given back at
// cleanup: a new tab in a browser context whose cookies, cache and downloads
// are its own.
func New(t testing.TB, vp Viewport) *Browser {
	t.Helper()
	shared.once.Do(func() { shared.err = start() })
	if shared.err != nil {
		t.Fatalf("start chromium: %v", shared.err)
	}
	bc, err := takeContext()
	if err != nil {
		t.Fatalf("open a browser context: %v", err)
	}
	ctx, closeTab, err := openTab(bc)
	if err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	t.Cleanup(func() {
		closeTab()
		giveBack(bc)
	})
	b := &Browser{t: t, Ctx: ctx}
	b.Run(emulation.SetDeviceMetricsOverride(vp.Width, vp.Height, vp.Scale, vp.Mobile))
	return b
}

// browserExecutor is ctx with the browser, rather than a tab, to send to.
func browserExecutor(ctx context.Context) context.Context {
	return cdp.WithExecutor(ctx, chromedp.FromContext(shared.ctx).Browser)
}

// takeContext returns an idle browser context of the pool, or a new one.
func takeContext() (*browserContext, error) {
	shared.mu.Lock()
	if n := len(shared.idle); n > 0 {
		bc := shared.idle[n-1]
		shared.idle = shared.idle[:n-1]
		shared.mu.Unlock()
		return bc, nil
	}
	shared.mu.Unlock()
	id, err := target.CreateBrowserContext().WithDisposeOnDetach(true).Do(browserExecutor(shared.ctx))
	if err != nil {
		return nil, err
	}
	// A new context has no window yet; headless Chromium opens a page in it
	// only as a new window.
	anchorID, err := target.CreateTarget("about:blank").WithBrowserContextID(id).WithNewWindow(true).Do(browserExecutor(shared.ctx))
	if err != nil {
		return nil, err
	}
	anchor, cancel := chromedp.NewContext(shared.ctx, chromedp.WithTargetID(anchorID))
	// Attaching must not carry a deadline: chromedp ends the tab with the
	// context of its first Run.
	if err := chromedp.Run(anchor); err != nil {
		cancel()
		return nil, err
	}
	return &browserContext{id: id, anchor: anchor, cancel: cancel}, nil
}

// openTab opens a tab in bc and returns it with what closes it.
func openTab(bc *browserContext) (context.Context, func(), error) {
	id, err := target.CreateTarget("about:blank").WithBrowserContextID(bc.id).Do(browserExecutor(shared.ctx))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := chromedp.NewContext(shared.ctx, chromedp.WithTargetID(id))
	// Downloads and second tabs find the browser context here.
	chromedp.FromContext(ctx).BrowserContextID = bc.id
	if err := chromedp.Run(ctx); err != nil {
		cancel()
		return nil, nil, err
	}
	return ctx, func() {
		c, stop := context.WithTimeout(shared.ctx, time.Minute)
		defer stop()
		_ = target.CloseTarget(id).Do(browserExecutor(c))
		cancel()
	}, nil
}

// giveBack empties a browser context a test is done with and keeps it for
// the next: its cookies, cache and download folder go; the tab's own state
// (extra headers, emulation) went with the tab. A context that cannot be
// emptied is closed.
func giveBack(bc *browserContext) {
	ctx, cancel := context.WithTimeout(bc.anchor, time.Minute)
	defer cancel()
	err := chromedp.Run(ctx,
		network.ClearBrowserCache(),
		chromedp.ActionFunc(func(ctx context.Context) error {
			if err := storage.ClearCookies().WithBrowserContextID(bc.id).Do(browserExecutor(ctx)); err != nil {
				return err
			}
			return browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorDefault).
				WithBrowserContextID(bc.id).Do(browserExecutor(ctx))
		}),
	)
	if err != nil {
		bc.cancel()
		return
	}
	shared.mu.Lock()
	shared.idle = append(shared.idle, bc)
	shared.mu.Unlock()
}

// ClearCookies forgets the cookies of b's browser context, and only its.
func (b *Browser) ClearCookies() {
	b.t.Helper()
	b.Run(chromedp.ActionFunc(func(ctx context.Context) error {
		return storage.ClearCookies().WithBrowserContextID(chromedp.FromContext(ctx).BrowserContextID).Do(browserExecutor(ctx))
	}))
}

// NewTab opens a second tab in b's browser context, sharing its cookies, at
// viewport vp; it is closed at cleanup.
func (b *Browser) NewTab(vp Viewport) context.Context {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.Ctx)
	b.t.Cleanup(cancel)
	// The tab's first Run opens it and must not carry a deadline: when
	// that context ends, chromedp closes the tab.
	if err := chromedp.Run(ctx); err != nil {
		b.t.Fatalf("open a tab: %v", err)
	}
	b.runIn(ctx, emulation.SetDeviceMetricsOverride(vp.Width, vp.Height, vp.Scale, vp.Mobile))
	return ctx
}

// AllowDownloads is the action that has the browser context of the tab it
// runs in save what its pages download in dir.
func AllowDownloads(dir string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		c := chromedp.FromContext(ctx)
		return browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(dir).
			WithBrowserContextID(c.BrowserContextID).Do(cdp.WithExecutor(ctx, c.Browser))
	})
}

// Run runs chromedp actions, for as long as the test may run (a loaded
// machine makes Chromium slow, not wrong), and fails the test on error.
func (b *Browser) Run(actions ...chromedp.Action) {
	b.t.Helper()
	b.runIn(b.Ctx, actions...)
}

func (b *Browser) runIn(ctx context.Context, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithDeadline(ctx, testwait.Deadline(b.t))
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// Try runs chromedp actions until the test's deadline, as Run does, and
// returns their error instead of failing the test.
func (b *Browser) Try(actions ...chromedp.Action) error {
	ctx, cancel := context.WithDeadline(b.Ctx, testwait.Deadline(b.t))
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// Location returns the page's current URL.
func (b *Browser) Location() string {
	b.t.Helper()
	var u string
	b.Run(chromedp.Location(&u))
	return u
}

// Text returns the visible text of the page's body. It asks the page
// itself: a query by node, such as chromedp.Text, fails when it meets a
// document chromedp has not caught up with after a navigation.
func (b *Browser) Text() string {
	b.t.Helper()
	var s string
	b.Run(chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &s))
	return s
}

// Screenshot saves a full-page PNG of the page named name under OutputDir
// when screenshots are on (FLOWD_TEST_SCREENSHOTS=1).
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	Screenshot(b.t, b.Ctx, name)
}

// Screenshot saves a full-page PNG of the tab of ctx named name under
// OutputDir when screenshots are on (FLOWD_TEST_SCREENSHOTS=1).
func Screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("FLOWD_TEST_SCREENSHOTS") != "1" {
		return
	}
	var png []byte
	ctx, cancel := context.WithDeadline(ctx, testwait.Deadline(t))
	defer cancel()
	// Quality 100 keeps it a PNG; any other is a JPEG.
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(OutputDir(t), name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// OutputDir is where a test's screenshots go: $FLOWD_TEST_OUTPUT (or
// testdata-output/ at the repository root) / the test's name.
func OutputDir(t testing.TB) string {
	root := os.Getenv("FLOWD_TEST_OUTPUT")
	if root == "" {
		root = filepath.Join(repoRoot(), "testdata-output")
	}
	dir := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(fmt.Errorf("screenshots: %w", err))
	}
	return dir
}

func repoRoot() string {
	dir, _ := os.Getwd()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return dir
}
