package oidclogin

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestDecodedCookiesAreKeptAsTheyWere: a cookie opened once is read from
// memory after, as it was sent: a renewal does not change what an older
// copy of the cookie says (it still times out at its own idle time), and a
// cookie changed by one byte is no session.
func TestDecodedCookiesAreKeptAsTheyWere(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	s := NewSessions(SessionConfig{Name: "flowd_consent", Key: make([]byte, 32), Idle: 30 * time.Minute, Absolute: 2 * time.Hour, Now: clk.Now})
	w := httptest.NewRecorder()
	started, err := s.Start(w, request(nil), Session{Subject: "ada", Attrs: map[string]string{"nid": "12345678901"}})
	if err != nil {
		t.Fatal(err)
	}
	first := w.Result().Cookies()
	for range 2 {
		got, ok, _ := s.Get(httptest.NewRecorder(), request(first))
		if !ok || got.ID != started.ID || got.Attrs["nid"] != "12345678901" {
			t.Fatalf("read back: %+v %v", got, ok)
		}
	}
	if n := s.decoded.values.Len(); n != 1 {
		t.Fatalf("%d cookies kept, want 1", n)
	}

	clk.now = clk.now.Add(20 * time.Minute)
	w = httptest.NewRecorder()
	if _, ok, _ := s.Get(w, request(first)); !ok {
		t.Fatal("the session ended within its idle time")
	}
	renewed := w.Result().Cookies()
	if len(renewed) != 1 || renewed[0].Value == first[0].Value {
		t.Fatalf("the session was not renewed: %v", renewed)
	}
	clk.now = clk.now.Add(11 * time.Minute) // 31 minutes after the first cookie, 11 after the renewal
	if _, ok, _ := s.Get(httptest.NewRecorder(), request(first)); ok {
		t.Error("the first cookie outlived its idle time: its renewal changed what it says")
	}
	if _, ok, _ := s.Get(httptest.NewRecorder(), request(renewed)); !ok {
		t.Error("the renewed cookie ended within its idle time")
	}

	forged := *renewed[0]
	b := []byte(forged.Value)
	b[len(b)/2] ^= 1
	forged.Value = string(b)
	if got, ok, _ := s.Get(httptest.NewRecorder(), request([]*http.Cookie{&forged})); ok {
		t.Errorf("a changed cookie was a session: %+v", got)
	}
}
