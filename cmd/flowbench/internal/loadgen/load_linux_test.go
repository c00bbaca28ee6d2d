package loadgen

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/testwait"
)

// testLoad is the load generator against srv with the given workers.
func testLoad(t *testing.T, srv *httptest.Server, workers int) *Load {
	t.Helper()
	l, err := New(srv.URL, workers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// runLimit bounds a test's run, which ends sooner, when every worker has
// sent its requests: it only keeps a broken loop from hanging the test.
const runLimit = 5 * time.Minute

// upTo makes next give each worker its requests up to its n-th since the
// load was made (a worker's i counts on from run to run): the run ends when
// every worker has sent them, however slow the machine.
func upTo(n int, next Next) Next {
	return func(w, i int) (Request, error) {
		if i >= n {
			return Request{}, ErrWorkerDone
		}
		return next(w, i)
	}
}

// The loop keeps every worker busy, counts what the server answered within
// the run, and gets over connections the server closes: after an answer
// with Connection: close, and while idle between runs.
func TestLoadDrivesEveryWorkerThroughClosedConnections(t *testing.T) {
	t.Parallel()
	var served, open atomic.Int64
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
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	l := testLoad(t, srv, len(perWorker))
	var checked atomic.Int64
	const perRun = 20
	next := func(w, i int) (Request, error) {
		return Request{Method: "GET", Path: fmt.Sprintf("/w/%d", w), Want: 200, Done: func(body []byte) error {
			checked.Add(1)
			if want := fmt.Sprintf(`{"worker":%d}`, w); string(body) != want {
				return fmt.Errorf("worker %d got %s", w, body)
			}
			return nil
		}}, nil
	}
	for run := range 2 {
		before := served.Load()
		s := l.Drive(context.Background(), runLimit, upTo((run+1)*perRun, next))
		if s.Errors != 0 {
			t.Fatalf("run %d: %d errors, the first: %s", run, s.Errors, s.FirstErr)
		}
		if len(s.Latencies) != perRun*len(perWorker) || served.Load()-before != int64(len(s.Latencies)) {
			t.Fatalf("run %d: %d requests counted, %d served, want %d", run, len(s.Latencies), served.Load()-before, perRun*len(perWorker))
		}
		// The server closes the idle connections before the next run.
		testwait.For(t, "the server to close the idle connections", func() (bool, string) {
			return open.Load() == 0, fmt.Sprintf("%d connections open", open.Load())
		})
	}
	for w := range perWorker {
		if got := perWorker[w].Load(); got != 2*perRun {
			t.Errorf("worker %d sent %d requests, want %d", w, got, 2*perRun)
		}
	}
	if checked.Load() != int64(2*perRun*len(perWorker)) {
		t.Fatalf("%d answers checked, want %d", checked.Load(), 2*perRun*len(perWorker))
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
	s := l.Drive(context.Background(), runLimit, upTo(5, func(_, _ int) (Request, error) {
		return Request{Method: "POST", Path: "/api/flows", Body: []byte(`{}`), Want: 201}, nil
	}))
	if s.Errors != 10 || len(s.Latencies) != 10 || !strings.Contains(s.FirstErr, "404 no such flow") {
		t.Fatalf("%d errors of %d requests, want 10 of 10; the first: %q", s.Errors, len(s.Latencies), s.FirstErr)
	}
}
