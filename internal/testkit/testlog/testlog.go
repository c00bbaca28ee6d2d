// Package testlog gives a test's servers a logger that writes to the
// test's own output, so that a failing test shows what the server said.
package testlog

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// New returns a logger whose warnings and errors go to t.Log. What is
// logged after t has ended (a server stopping in a cleanup) is dropped:
// testing refuses to log for a test that has completed.
func New(t testing.TB) *slog.Logger {
	w := &writer{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type writer struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log("server: " + strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *writer) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
