package identity

import (
	"strings"
	"testing"
	"time"
)

func TestSummarizeUserAgent(t *testing.T) {
	t.Parallel()
	tests := []struct{ ua, want string }{
		{"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox on Linux"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", "Edge on Windows"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "Safari on macOS"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "Safari on iOS"},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36", "Chrome on Android"},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/126.0.0.0 Safari/537.36", "Headless Chrome on Linux"},
		{"curl/8.5.0", "curl"},
		{"Go-http-client/1.1", "Go-http-client"},
		{"", "unknown browser"},
		{"evil\x00\nname/1", "evilname"},
		{strings.Repeat("x", 500), strings.Repeat("x", 40)},
	}
	for _, tt := range tests {
		if got := SummarizeUserAgent(tt.ua); got != tt.want {
			t.Errorf("SummarizeUserAgent(%q) = %q, want %q", tt.ua, got, tt.want)
		}
	}
}

func TestSessionAuditEntries(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ended := []Session{
		{ID: "s1", Kind: SessionConsole, OrganizationID: "org-a", Username: "ada", UserAgent: "Firefox on Linux", Address: "192.0.2.7", CreatedAt: at},
		{ID: "s2", Kind: SessionConsent, Subject: "eid-1", CreatedAt: at},
	}
	out := SessionAuditEntries("staff:bob", EndedByAdmin, ended)
	if len(out) != 1 {
		t.Fatalf("entries %+v, want one: consent sessions belong to no organization", out)
	}
	e := out[0]
	want := "console session s1 started 2030-01-02T03:04:05Z, Firefox on Linux, from 192.0.2.7: ended by an admin"
	if e.Action != AuditSessionEnd || e.Actor != "staff:bob" || e.Target != "ada" || e.OrganizationID != "org-a" || e.Detail != want {
		t.Fatalf("entry %+v", e)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	out = SessionAuditEntries("staff:ada", "", ended[:1])
	if len(out) != 1 || out[0].Action != AuditSessionSignOut || out[0].Detail != strings.TrimSuffix(want, ": ended by an admin") {
		t.Fatalf("sign-out entries %+v", out)
	}
}
