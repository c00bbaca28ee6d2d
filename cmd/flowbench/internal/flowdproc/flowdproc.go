// Package flowdproc runs the flowd under test: a process of a freshly built
// binary, ready when its /readyz says so, its peak memory sampled.
package flowdproc

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/procfs"
)

// Server is a flowd process under test, started from a freshly built binary.
type Server struct {
	cmd     *exec.Cmd
	url     string
	peakRSS atomic.Int64 // bytes, sampled
	stop    chan struct{}
}

// Start runs `flowd serve` with env and waits until it is ready.
func Start(ctx context.Context, bin, url string, env []string, logFile *os.File) (*Server, error) {
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{cmd: cmd, url: url, stop: make(chan struct{})}
	go s.sampleRSS()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("flowd at %s was not ready in 60 s (log: %s)", url, logFile.Name())
}

// sampleRSS records the process's peak resident set size: VmHWM is the
// kernel's own high-water mark, so no spike between samples is missed.
func (s *Server) sampleRSS() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if v := procfs.StatusKB(s.cmd.Process.Pid, "VmHWM:"); v > s.peakRSS.Load() {
				s.peakRSS.Store(v)
			}
		}
	}
}

// Pid is the process id of the server.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// PeakRSSMiB is the highest resident set size seen so far.
func (s *Server) PeakRSSMiB() float64 {
	if v := procfs.StatusKB(s.cmd.Process.Pid, "VmHWM:"); v > s.peakRSS.Load() {
		s.peakRSS.Store(v)
	}
	return float64(s.peakRSS.Load()) / (1 << 20)
}

// Stop ends the server gracefully.
func (s *Server) Stop() {
	close(s.stop)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
	}
}
