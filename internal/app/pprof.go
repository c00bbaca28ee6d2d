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
	return func(ctx context.Context) error {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		log.Warn("pprof is serving", "addr", ln.Addr().String())
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
