package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// testLoad is the load generator against srv with the given workers.
func testLoad(t *testing.T, srv *httptest.Server, workers int) *load {
	t.Helper()
	l, err := newLoad(srv.URL, workers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.close)
	return l
}

// The loop keeps every worker busy, counts what the server answered within
// the run, and gets over connections the server closes: after an answer
// with Connection: close, and while idle between runs.
func TestLoadDrivesEveryWorkerThroughClosedConnections(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	perWorker := make([]atomic.Int64, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		var worker int
		fmt.Sscanf(r.URL.Path, "/w/%d", &worker)
		perWorker[worker].Add(1)
		if n%5 == 0 {
			w.Header().Set("Connection", "close")
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"worker":%d}`, worker)
	}))
	srv.Config.IdleTimeout = 50 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	l := testLoad(t, srv, len(perWorker))
	var checked atomic.Int64
	next := func(w, i int) (request, error) {
		return request{method: "GET", path: fmt.Sprintf("/w/%d", w), want: 200, done: func(body []byte) error {
			checked.Add(1)
			if want := fmt.Sprintf(`{"worker":%d}`, w); string(body) != want {
				return fmt.Errorf("worker %d got %s", w, body)
			}
			return nil
		}}, nil
	}
	for run := range 2 {
		s := l.drive(context.Background(), 300*time.Millisecond, next)
		if s.errors != 0 {
			t.Fatalf("run %d: %d errors, the first: %s", run, s.errors, s.firstErr)
		}
		if len(s.latencies) == 0 || int64(len(s.latencies)) > served.Load() {
			t.Fatalf("run %d: %d requests counted, %d served", run, len(s.latencies), served.Load())
		}
		time.Sleep(100 * time.Millisecond) // the server closes the idle connections
	}
	for w := range perWorker {
		if perWorker[w].Load() == 0 {
			t.Errorf("worker %d sent nothing", w)
		}
	}
	if checked.Load() == 0 {
		t.Fatal("no answer was checked")
	}
}

// An answer with another status than the request wants counts as an error,
// with what the server said.
func TestLoadCountsUnwantedStatusesAsErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want JSON", http.StatusUnsupportedMediaType)
			return
		}
		http.Error(w, "no such flow", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	l := testLoad(t, srv, 2)
	s := l.drive(context.Background(), 200*time.Millisecond, func(_, _ int) (request, error) {
		return request{method: "POST", path: "/api/flows", body: []byte(`{}`), want: 201}, nil
	})
	if s.errors == 0 || s.errors != len(s.latencies) || !strings.Contains(s.firstErr, "404 no such flow") {
		t.Fatalf("%d errors of %d requests, the first: %q", s.errors, len(s.latencies), s.firstErr)
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
