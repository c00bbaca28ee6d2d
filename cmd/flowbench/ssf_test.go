package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/testwait"
)

// compactSET is an unsigned stand-in of a SET with claims: the receiver
// reads claims and leaves signatures to the tests of flowd.
func compactSET(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"ES256","typ":"secevent+jwt"}`)) + "." + enc(payload) + ".c2ln"
}

func revokedSET(t *testing.T, jti, flowID string) string {
	return compactSET(t, map[string]any{"jti": jti, "iat": 1765111111,
		"sub_id": map[string]any{"format": "complex", "consent": map[string]string{"format": "opaque", "id": flowID}},
		"events": map[string]any{eventConsentRevoked: map[string]any{"reason": "withdrawn", "initiator": "organization"}}})
}

// TestSETReceiverNotesTheFirstArrivalOfEachConsent: a consent-revoked SET
// is acknowledged with 202 and its consent noted once; another event is
// acknowledged and not noted; a body that is no SET gets RFC 8935's error.
func TestSETReceiverNotesTheFirstArrivalOfEachConsent(t *testing.T) {
	t.Parallel()
	r, err := startSETReceiver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	post := func(body string) int {
		t.Helper()
		res, err := http.Post(r.url, "application/secevent+jwt", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, c := range []struct {
		name, body string
		want       int
	}{
		{"revoked", revokedSET(t, "j1", "flow-1"), http.StatusAccepted},
		{"revoked again", revokedSET(t, "j2", "flow-1"), http.StatusAccepted},
		{"verification", compactSET(t, map[string]any{"jti": "j3",
			"events": map[string]any{"https://schemas.openid.net/secevent/ssf/event-type/verification": map[string]string{"state": "x"}}}), http.StatusAccepted},
		{"not a JWS", "hello", http.StatusBadRequest},
		{"no jti", compactSET(t, map[string]any{"events": map[string]any{eventConsentRevoked: map[string]any{}}}), http.StatusBadRequest},
	} {
		if got := post(c.body); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	got, missing := r.arrived([]string{"flow-1", "flow-2"})
	if len(got) != 1 || got["flow-1"].IsZero() || missing != 1 {
		t.Fatalf("arrived: %v, %d missing; want flow-1 alone, flow-2 missing", got, missing)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sets != 5 || r.bad != 2 {
		t.Fatalf("receiver counted %d SETs, %d bad; want 5, 2", r.sets, r.bad)
	}
}

// TestSilentReceiverHoldsConnectionsWithoutAnswering: a push to the
// hanging receiver gets no answer until its client gives up.
func TestSilentReceiverHoldsConnectionsWithoutAnswering(t *testing.T) {
	t.Parallel()
	s, err := startSilentReceiver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	client := &http.Client{Timeout: 200 * time.Millisecond}
	_, err = client.Post(s.url, "application/secevent+jwt", strings.NewReader("x.y.z"))
	var timeout net.Error
	if err == nil || !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Fatalf("a push to the silent receiver: %v, want a timeout", err)
	}
	testwait.For(t, "the silent receiver to count its connection", func() (bool, string) {
		n := s.accepted()
		return n == 1, strconv.Itoa(n) + " connections accepted"
	})
}

// TestWithdrawalsReadTheAnswersWithdrawnAt: latencies run from the flow's
// consent.withdrawnAt in the withdrawal's answer.
func TestWithdrawalsReadTheAnswersWithdrawnAt(t *testing.T) {
	t.Parallel()
	w := newWithdrawals()
	if err := w.note([]byte(`{"flow":{"flowId":"f1","consent":{"status":"Withdrawn","withdrawnAt":"2026-12-07T10:00:00.250Z"}}}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.note([]byte(`{"flow":{"flowId":"f2","consent":{"status":"Accepted","withdrawnAt":null}}}`)); err == nil {
		t.Fatal("an answer without withdrawnAt was taken")
	}
	arrived := time.Date(2026, 12, 7, 10, 0, 0, 550_000_000, time.UTC)
	lat, _ := w.latencies(map[string]time.Time{"f1": arrived})
	if len(lat) != 1 || lat[0] != 300*time.Millisecond || strings.Join(w.ids(), ",") != "f1" {
		t.Fatalf("latencies %v of ids %v; want [300ms] of f1", lat, w.ids())
	}
}
