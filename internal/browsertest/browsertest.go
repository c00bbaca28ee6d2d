// Package browsertest drives Debian's headless Chromium through chromedp for
// the tests of flowd's pages: a fresh profile per browser, the flags this
// machine needs, and screenshots at phone width saved for review.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/flowd/flowd/internal/testwait"
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

// Browser is one headless Chromium with its own profile.
type Browser struct {
	t   testing.TB
	Ctx context.Context
}

// chromium finds the browser: FLOWD_CHROMIUM, else chromium on PATH.
func chromium(t testing.TB) string {
	if p := os.Getenv("FLOWD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: `make test` installs it with apt-get (apt-get install chromium), or set FLOWD_CHROMIUM")
	return ""
}

// New starts a browser for the test, closed at cleanup. Each call gets a
// fresh profile, so cookies never leak between browsers.
func New(t testing.TB, vp Viewport) *Browser {
	t.Helper()
	profile := profileDir(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(int(vp.Width), int(vp.Height)),
		// Under `make test` every package runs at once on two cores, and
		// Chromium's start has taken longer than chromedp's 20 s default.
		chromedp.WSURLReadTimeout(90 * time.Second),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Run(ctx, emulation.SetDeviceMetricsOverride(vp.Width, vp.Height, vp.Scale, vp.Mobile)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &Browser{t: t, Ctx: ctx}
}

// profileDir is a fresh profile folder removed at cleanup. It is not
// t.TempDir, whose removal fails the test when Chromium's helper processes,
// which outlive the browser by a moment, still write into it; removal is
// retried for a while instead.
func profileDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "flowd-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return dir
}

// Run runs chromedp actions, for as long as the test may run (a loaded
// machine makes Chromium slow, not wrong), and fails the test on error.
func (b *Browser) Run(actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithDeadline(b.Ctx, testwait.Deadline(b.t))
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// Try runs chromedp actions with a generous deadline and returns their
// error: for steps that may meet a page in the middle of navigating, where
// Chromium refuses a call that a moment later succeeds.
func (b *Browser) Try(actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
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

// Text returns the visible text of the page's body.
func (b *Browser) Text() string {
	b.t.Helper()
	var s string
	b.Run(chromedp.Text("body", &s, chromedp.ByQuery))
	return s
}

// Screenshot saves a full-page PNG (quality 100: any other is JPEG) named name under OutputDir, for people to
// review how the page looks.
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	var png []byte
	b.Run(chromedp.FullScreenshot(&png, 100))
	dir := OutputDir(b.t)
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
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
		t.Fatal(err)
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
