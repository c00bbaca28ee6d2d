package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof is the runner of Go's profiler on ln (FLOWD_PPROF_ADDR). It is
// off unless asked for, and has a listener of its own so that the profiler
// is never reachable through the public address: bind it to loopback
// (127.0.0.1:6060) and reach it through an SSH tunnel or `kubectl
// port-forward`.
func servePprof(ln net.Listener, log *slog.Logger) func(context.Context) error {
	mux := http.NewServeMux()
	handleProfiler(mux)
	log.Warn("pprof is serving", "addr", ln.Addr().String())
	return serveHandler(ln, mux)
}

// serveOps is the runner of the operations listener on ln (FLOWD_OPS_ADDR):
// ops (metrics, health and readiness) and Go's profiler. The runners stop
// only once the public server has drained, so that it answers throughout.
func serveOps(ln net.Listener, ops http.Handler, log *slog.Logger) func(context.Context) error {
	mux := http.NewServeMux()
	handleProfiler(mux)
	mux.Handle("/", ops)
	log.Info("operations listener is serving", "addr", ln.Addr().String())
	return serveHandler(ln, mux)
}

// handleProfiler adds Go's profiler under /debug/pprof/ to mux.
func handleProfiler(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// serveHandler is a runner that serves h on ln until its context ends.
func serveHandler(ln net.Listener, h http.Handler) func(context.Context) error {
	return func(ctx context.Context) error {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		select {
		case err := <-served: // the listener failed
			_ = srv.Close()
			return err
		case <-ctx.Done():
		}
		err := srv.Close()
		if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
			err = errors.Join(err, serveErr)
		}
		return err
	}
}
