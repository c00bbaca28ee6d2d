package loadgen

import (
	"strings"
	"testing"
)

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		status  int
		body    string
		done    bool
		wantErr string
	}{
		{"whole", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", true, ""},
		{"empty body", "HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n", 204, "", true, ""},
		{"204 without a length", "HTTP/1.1 204 No Content\r\nDate: Mon, 07 Dec 2026 17:45:00 GMT\r\n\r\n", 204, "", true, ""},
		{"head not yet whole", "HTTP/1.1 200 OK\r\nContent-Len", 0, "", false, ""},
		{"body not yet whole", "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nab", 201, "", false, ""},
		{"no length", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 0, "", false, "without Content-Length"},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 0, "", false, "bad Content-Length"},
		{"bad status line", "SPDY/3 200 OK\r\nContent-Length: 0\r\n\r\n", 0, "", false, "bad status line"},
		{"more than the length", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nok", 0, "", false, "more bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, done, err := parseAnswer([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || done != tt.done || (done && (status != tt.status || string(body) != tt.body)) {
				t.Fatalf("got %d %q done=%v err=%v, want %d %q done=%v", status, body, done, err, tt.status, tt.body, tt.done)
			}
		})
	}
}

// TestClosesReadsOnlyTheConnectionHeader: an answer asks to close its
// connection by its Connection header alone, in any case and spacing.
func TestClosesReadsOnlyTheConnectionHeader(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nconnection:CLOSE \r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nX-Connection: close\r\nContent-Length: 0\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 19\r\n\r\nConnection: close\r\n", false}, // in the body
		{"HTTP/1.1 200 OK\r\nConnection: close\r\n", false},                           // the head is not whole yet
	} {
		if got := closes([]byte(tt.in)); got != tt.want {
			t.Errorf("closes(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
