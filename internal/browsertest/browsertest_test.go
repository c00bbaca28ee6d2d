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
