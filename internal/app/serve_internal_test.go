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

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/web"
)

// newTestServer is a web server without modules and without a shutdown
// delay, listening on a free loopback port.
func newTestServer(t *testing.T) (*web.Server, net.Listener) {
	t.Helper()
	cfg, err := config.Load(func(k string) string { return map[string]string{"FLOWD_SHUTDOWN_DELAY": "0"}[k] }, config.Need{})
	if err != nil {
		t.Fatal(err)
	}
	srv := web.New(web.Deps{Log: slog.New(slog.DiscardHandler), Config: cfg, Registry: prometheus.NewRegistry()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return srv, ln
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
	case <-time.After(10 * time.Second):
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
	srv.Echo().GET("/test-slow", func(c echo.Context) error {
		close(started)
		time.Sleep(300 * time.Millisecond)
		finished.Store(true)
		return c.String(http.StatusOK, "finished")
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
	case <-time.After(10 * time.Second):
		t.Fatal("serveWith did not return")
	}
	if !requestDoneFirst.Load() {
		t.Fatal("the runners were stopped before the in-flight request finished")
	}
}
