package app

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves Go's profiler on addr (FLOWD_PPROF_ADDR) until ctx ends.
// It is off unless asked for, and has a listener of its own so that the
// profiler is never reachable through the public address: bind it to
// loopback (127.0.0.1:6060) and reach it through an SSH tunnel or
// `kubectl port-forward`.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Warn("pprof is serving", "addr", ln.Addr().String())
	go func() { _ = srv.Serve(ln) }()
	return nil
}
