package formbrowser

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// hop is one request as the test server saw it.
type hop struct {
	method, path, cookie, accept, language, contentType, fetchSite string
	form                                                           url.Values
}

// site is a test server of a sign-in like journey: /start sets a cookie and
// redirects relatively, /next insists on the cookie, /form takes a POST and
// redirects to /done, /away redirects off the site and /loop to itself.
type site struct {
	*httptest.Server
	mu   sync.Mutex
	hops []hop
}

func newSite(t *testing.T) *site {
	s := &site{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /start", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
		w.Header().Set("Location", "next?step=2")
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("GET /next", func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("session"); err != nil || c.Value != "s1" {
			http.Error(w, "no session", http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, "/done", http.StatusSeeOther)
	})
	mux.HandleFunc("POST /form", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/done?name="+url.QueryEscape(r.PostFormValue("name")), http.StatusSeeOther)
	})
	mux.HandleFunc("GET /done", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<form method="post"><input type="hidden" name="csrf" value="a&amp;b"><input type="hidden" name="request" value="r1"></form>`)
	})
	mux.HandleFunc("GET /away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://bank.example/back", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := hop{method: r.Method, path: r.URL.RequestURI(), accept: r.Header.Get("Accept"), language: r.Header.Get("Accept-Language"),
			contentType: r.Header.Get("Content-Type"), fetchSite: r.Header.Get("Sec-Fetch-Site")}
		if c, err := r.Cookie("session"); err == nil {
			h.cookie = c.Value
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err == nil {
				h.form = r.PostForm
			}
		}
		s.mu.Lock()
		s.hops = append(s.hops, h)
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// seen returns the requests the site received, in order.
func (s *site) seen() []hop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hop(nil), s.hops...)
}

func TestDoShowsTheRedirectResolved(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	p := New(t).Get(s.URL + "/start")
	if p.Status != http.StatusFound || p.Location != s.URL+"/next?step=2" || p.URL != s.URL+"/start" {
		t.Fatalf("got %d to %q from %q; want 302 to %q", p.Status, p.Location, p.URL, s.URL+"/next?step=2")
	}
	if !strings.HasPrefix(p.Header.Get("Set-Cookie"), "session=s1") {
		t.Fatalf("Set-Cookie %q", p.Header.Get("Set-Cookie"))
	}
	if hops := s.seen(); len(hops) != 1 {
		t.Fatalf("Do followed the redirect by itself: %+v", hops)
	}
}

func TestFollowKeepsCookiesAndSendsTheBrowsersHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		method   string
		path     string
		form     url.Values
		language string
		header   http.Header
		want     []hop // the hops, as the site saw them
		end      string
	}{
		{"GET through a cookie and two redirects", http.MethodGet, "/start", nil, "", nil, []hop{
			{method: "GET", path: "/start", accept: "text/html"},
			{method: "GET", path: "/next?step=2", cookie: "s1", accept: "text/html"},
			{method: "GET", path: "/done", cookie: "s1", accept: "text/html"},
		}, "/done"},
		{"a form POST with a language and fetch metadata", http.MethodPost, "/form", url.Values{"name": {"Åse & Bo"}}, "nb-NO,nb;q=0.9",
			http.Header{"Sec-Fetch-Site": {"same-origin"}}, []hop{
				{method: "POST", path: "/form", accept: "text/html", language: "nb-NO,nb;q=0.9", contentType: "application/x-www-form-urlencoded",
					fetchSite: "same-origin", form: url.Values{"name": {"Åse & Bo"}}},
				// The redirect after a form is a GET, without the form's headers.
				{method: "GET", path: "/done?name=%C3%85se+%26+Bo", accept: "text/html", language: "nb-NO,nb;q=0.9"},
			}, "/done?name=%C3%85se+%26+Bo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t)
			b := New(t)
			b.AcceptLanguage, b.FormHeader = tt.language, tt.header
			p := b.Follow(tt.method, s.URL+tt.path, tt.form)
			if p.Status != http.StatusOK || p.URL != s.URL+tt.end || p.Location != "" {
				t.Fatalf("ended at %s with %d (Location %q); want 200 at %s", p.URL, p.Status, p.Location, s.URL+tt.end)
			}
			got := s.seen()
			if len(got) != len(tt.want) {
				t.Fatalf("%d requests, want %d: %+v", len(got), len(tt.want), got)
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tt.want[i]) {
					t.Errorf("request %d:\n got %+v\nwant %+v", i+1, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestFollowStopsAtARedirectThatLeavesScope(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := New(t)
	b.Scope = s.URL
	p := b.Follow(http.MethodGet, s.URL+"/away", nil)
	if p.Status != http.StatusSeeOther || p.Location != "https://bank.example/back" {
		t.Fatalf("got %d to %q; want the redirect off the site, not followed", p.Status, p.Location)
	}
}

func TestHiddenFieldsAreUnescaped(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	v := New(t).Get(s.URL + "/done").HiddenFields(t)
	if len(v) != 2 || v.Get("csrf") != "a&b" || v.Get("request") != "r1" {
		t.Fatalf("hidden fields %v", v)
	}
}

// fatalTB records a test's failure and stops the goroutine that called
// Fatal, as testing.T does, so that a failure can itself be checked.
type fatalTB struct {
	testing.TB
	failure string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) { f.failure = fmt.Sprint(args...); runtime.Goexit() }

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failureOf runs do against a recording TB and returns its failure, or "".
func failureOf(t *testing.T, do func(tb testing.TB)) string {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		do(tb)
	}()
	<-done
	return tb.failure
}

func TestFailures(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	tests := []struct {
		name string
		do   func(tb testing.TB)
		want string
	}{
		{"a redirect loop", func(tb testing.TB) { New(tb).Follow(http.MethodGet, s.URL+"/loop", nil) },
			fmt.Sprintf("more than %d redirects, the last to %s/loop", maxRedirects, s.URL)},
		{"a page without a form", func(tb testing.TB) { New(tb).Get(s.URL + "/next").HiddenFields(tb) },
			"no form on " + s.URL + "/next (401)"},
		{"no server", func(tb testing.TB) { New(tb).Get("http://127.0.0.1:1/") }, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := failureOf(t, tt.do); !strings.Contains(got, tt.want) {
				t.Fatalf("failure %q, want it to contain %q", got, tt.want)
			}
		})
	}
	// A loop is cut off, not followed without end.
	loops := 0
	for _, h := range s.seen() {
		if h.path == "/loop" {
			loops++
		}
	}
	if loops != maxRedirects+1 {
		t.Fatalf("/loop requested %d times, want %d", loops, maxRedirects+1)
	}
}
