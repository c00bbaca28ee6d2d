package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testkit/testwait"
)

// drainingServer serves its mux until ctx ends, then lets in-flight
// requests finish before Serve returns, as web.Server does (whose draining
// web's tests check); serveWith's tests need only that.
type drainingServer struct{ mux *http.ServeMux }

func (s drainingServer) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	err := srv.Shutdown(context.Background())
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// newTestServer is a draining server listening on a free loopback port.
func newTestServer(t *testing.T) (drainingServer, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return drainingServer{mux: http.NewServeMux()}, ln
}

func TestServeWithEndsWhenARunnerFails(t *testing.T) {
	t.Parallel()
	srv, ln := newTestServer(t)
	var steadyStopped atomic.Bool
	failed := errors.New("no database")
	done := make(chan error, 1)
	go func() {
		done <- serveWith(context.Background(), slog.New(slog.DiscardHandler), srv, ln,
			runner{"steady", func(ctx context.Context) error {
				<-ctx.Done()
				time.Sleep(50 * time.Millisecond) // stopping takes a while
				steadyStopped.Store(true)
				return nil
			}},
			runner{"failing", func(context.Context) error { return failed }},
		)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, failed) || !strings.Contains(err.Error(), "failing") {
			t.Fatalf("serveWith returned %v, want the failing runner's error, named", err)
		}
	case <-time.After(time.Until(testwait.Deadline(t))):
		t.Fatal("serveWith went on serving after a runner failed")
	}
	if !steadyStopped.Load() {
		t.Fatal("serveWith returned before every runner had stopped")
	}
}

func TestServeWithStopsRunnersAfterTheServerDrained(t *testing.T) {
	t.Parallel()
	srv, ln := newTestServer(t)
	started, finished := make(chan struct{}), atomic.Bool{}
	srv.mux.HandleFunc("GET /test-slow", func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		finished.Store(true)
		_, _ = io.WriteString(w, "finished")
	})
	var requestDoneFirst atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveWith(ctx, slog.New(slog.DiscardHandler), srv, ln,
			runner{"workers", func(ctx context.Context) error {
				<-ctx.Done()
				requestDoneFirst.Store(finished.Load())
				return errors.New("cut off a delivery") // logged, not returned
			}},
			runner{"returns nothing", func(ctx context.Context) error {
				<-ctx.Done()
				return nil
			}},
		)
	}()
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/test-slow")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serveWith returned %v after a normal stop", err)
		}
	case <-time.After(time.Until(testwait.Deadline(t))):
		t.Fatal("serveWith did not return")
	}
	if !requestDoneFirst.Load() {
		t.Fatal("the runners were stopped before the in-flight request finished")
	}
}
