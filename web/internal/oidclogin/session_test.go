package oidclogin

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// clock is a settable time for session timeouts.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// request is a request carrying cookies.
func request(cookies []*http.Cookie) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	return r
}

func TestSessionTimeoutsAndRenewal(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	s := NewSessions(SessionConfig{Name: "flowd_console", Key: key, Idle: 30 * time.Minute, Absolute: 2 * time.Hour, Now: clk.Now})

	w := httptest.NewRecorder()
	first, err := s.Start(w, request(nil), Session{Subject: "ada", Attrs: map[string]string{"org": "org-a"}})
	if err != nil {
		t.Fatal(err)
	}
	cookies := w.Result().Cookies()
	got, ok, _ := s.Get(httptest.NewRecorder(), request(cookies))
	if !ok || got.Subject != "ada" || got.Attrs["org"] != "org-a" || got.ID != first.ID || got.CSRF == "" {
		t.Fatalf("read back: %+v %v", got, ok)
	}

	// A new sign-in never keeps the session the browser brought.
	w = httptest.NewRecorder()
	second, _ := s.Start(w, request(cookies), Session{Subject: "ada", Attrs: map[string]string{"org": "org-a"}})
	if second.ID == first.ID || second.CSRF == first.CSRF {
		t.Fatal("sign-in kept the earlier session's id or CSRF token")
	}
	cookies = w.Result().Cookies()

	// Use within the idle time keeps it alive (the cookie is re-sent) …
	for range 5 {
		clk.now = clk.now.Add(20 * time.Minute)
		w = httptest.NewRecorder()
		if _, ok, _ := s.Get(w, request(cookies)); !ok {
			t.Fatalf("session ended at %v despite use", clk.now)
		}
		if c := w.Result().Cookies(); len(c) > 0 {
			cookies = c
		}
	}
	// … but not past the absolute limit (1h40m so far).
	clk.now = clk.now.Add(25 * time.Minute)
	if _, ok, _ := s.Get(httptest.NewRecorder(), request(cookies)); ok {
		t.Fatal("session outlived its absolute timeout")
	}

	// Idle: a fresh session left alone past 30 minutes ends.
	w = httptest.NewRecorder()
	_, _ = s.Start(w, request(nil), Session{Subject: "ada"})
	cookies = w.Result().Cookies()
	clk.now = clk.now.Add(31 * time.Minute)
	if _, ok, _ := s.Get(httptest.NewRecorder(), request(cookies)); ok {
		t.Fatal("session outlived its idle timeout")
	}
}

func TestSessionCookiesOfOnePurposeAreWorthlessForAnother(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	console := NewSessions(SessionConfig{Name: "flowd_console", Key: key, Idle: time.Hour, Absolute: time.Hour})
	consent := NewSessions(SessionConfig{Name: "flowd_consent", Key: key, Idle: time.Hour, Absolute: time.Hour, Secure: true})
	w := httptest.NewRecorder()
	if _, err := console.Start(w, request(nil), Session{Subject: "ada"}); err != nil {
		t.Fatal(err)
	}
	c := w.Result().Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure {
		t.Fatalf("console cookie flags: %+v", c)
	}
	c.Name = "flowd_consent" // the same value presented as the other cookie
	if _, ok, _ := consent.Get(httptest.NewRecorder(), request([]*http.Cookie{c})); ok {
		t.Fatal("a console cookie opened a consent session")
	}
	w = httptest.NewRecorder()
	_, _ = consent.Start(w, request(nil), Session{Subject: "x"})
	if !w.Result().Cookies()[0].Secure {
		t.Fatal("consent cookie lacks Secure under https")
	}
	tampered := w.Result().Cookies()[0]
	tampered.Value = tampered.Value[:len(tampered.Value)-2] + "AA"
	if _, ok, _ := consent.Get(httptest.NewRecorder(), request([]*http.Cookie{tampered})); ok {
		t.Fatal("a tampered cookie was accepted")
	}
}

func TestStaffFromClaims(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		claims map[string]any
		org    string
		role   string
		err    error
	}{
		{"string role", map[string]any{"org_id": "o1", "roles": "viewer", "preferred_username": "ada"}, "o1", "viewer", nil},
		{"admin wins", map[string]any{"org_id": "o1", "roles": []any{"viewer", "admin", "other"}}, "o1", "admin", nil},
		{"org as a list of one", map[string]any{"org_id": []any{"o2"}, "roles": []any{"viewer"}}, "o2", "viewer", nil},
		{"no org", map[string]any{"roles": []any{"admin"}}, "", "", ErrNoOrganization},
		{"org list of two", map[string]any{"org_id": []any{"o1", "o2"}, "roles": []any{"admin"}}, "", "", ErrNoOrganization},
		{"unknown roles only", map[string]any{"org_id": "o1", "roles": []any{"owner"}}, "", "", ErrNoRole},
		{"no roles", map[string]any{"org_id": "o1"}, "", "", ErrNoRole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := StaffFromClaims(Identity{Subject: "sub-1", Claims: tt.claims}, "org_id", "roles")
			if err != tt.err {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if err == nil && (s.OrganizationID != tt.org || string(s.Role) != tt.role || s.Username == "") {
				t.Fatalf("got %+v", s)
			}
		})
	}
}
