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
