package browsertest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

func TestBrowserRendersAPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>x</title><h1 id="h">Hello browser</h1>`))
	}))
	defer srv.Close()
	b := New(t, Phone)
	b.Run(chromedp.Navigate(srv.URL))
	if !strings.Contains(b.Text(), "Hello browser") {
		t.Fatalf("page text %q", b.Text())
	}
	b.Screenshot("hello")
}

// TestAccessibilityFindsSeriousViolations: axe-core reports an image
// without a text alternative and a field without a label, and nothing on a
// page that has both.
func TestAccessibilityFindsSeriousViolations(t *testing.T) {
	pages := map[string]string{
		"/bad": `<!doctype html><html lang="en"><title>bad</title><main><h1>Bad</h1><img src="/x.png"><input type="text"></main></html>`,
		"/good": `<!doctype html><html lang="en"><title>good</title><main><h1>Good</h1><img src="/x.png" alt="A cat">` +
			`<label for="f">Name</label><input id="f" type="text"></main></html>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(pages[r.URL.Path]))
	}))
	defer srv.Close()
	b := New(t, Phone)
	b.Run(chromedp.Navigate(srv.URL + "/bad"))
	bad, err := b.Accessibility()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range bad {
		ids = append(ids, v.ID)
	}
	if got := strings.Join(ids, " "); !strings.Contains(got, "image-alt") || !strings.Contains(got, "label") {
		t.Errorf("violations of the bad page: %q, want image-alt and label", got)
	}
	b.Run(chromedp.Navigate(srv.URL + "/good"))
	if good, err := b.Accessibility(); err != nil || len(good) != 0 {
		t.Errorf("violations of the good page: %v, %v", good, err)
	}
}
