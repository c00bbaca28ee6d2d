package web_test

import (
	"net/http"
	"testing"
)

// TestAssetsListNoDirectories: the embedded assets are served file by file;
// a directory, with or without its slash, is not found rather than listed.
func TestAssetsListNoDirectories(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for path, want := range map[string]int{
		"/assets/css/app.css": http.StatusOK,
		"/assets/js/flowd.js": http.StatusOK,
		"/assets/":            http.StatusNotFound,
		"/assets/css/":        http.StatusNotFound,
		"/assets/css":         http.StatusNotFound,
		"/assets/js/":         http.StatusNotFound,
		"/assets/./css/":      http.StatusNotFound,
	} {
		resp, err := client.Get(ts.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
