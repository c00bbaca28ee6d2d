package app_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowd/flowd/internal/app"
	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/flowdtest"
)

// TestServeDrainsBeforeItStops: once serve's context ends, /readyz answers
// 503 for the shutdown delay while requests are still served, so that a load
// balancer takes the instance out of rotation before connections fail.
func TestServeDrainsBeforeItStops(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_SHUTDOWN_DELAY", delay.String()))
	if resp, body := get(t, in.URL+"/readyz", ""); resp.StatusCode != 200 {
		t.Fatalf("readyz before stopping: %d %s", resp.StatusCode, body)
	}

	stopping := time.Now()
	stopped := make(chan time.Time, 1)
	go func() {
		in.Stop(t)
		stopped <- time.Now()
	}()
	for {
		resp, body := get(t, in.URL+"/readyz", "")
		if resp.StatusCode == 503 && strings.Contains(body, `"draining"`) {
			break
		}
		if time.Since(stopping) > delay/2 {
			t.Fatalf("readyz after the context ended: %d %s", resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, body := get(t, in.URL+"/api/openapi.json", ""); resp.StatusCode != 200 {
		t.Fatalf("a request while draining: %d %s", resp.StatusCode, body)
	}
	select {
	case at := <-stopped:
		if at.Sub(stopping) < delay {
			t.Fatalf("serve returned %v after its context ended, before the delay of %v", at.Sub(stopping), delay)
		}
	case <-time.After(delay + 30*time.Second):
		t.Fatal("serve did not return")
	}
}

// TestServeLeavesNothingBehindWhenItFails makes serve fail at start in
// several ways, with its context still alive, and checks that it released
// every port it opened and left no goroutine running.
// Not parallel: goleak sees every goroutine of the process.
func TestServeLeavesNothingBehindWhenItFails(t *testing.T) {
	dbURL := dbtest.NewURL(t)
	// A signing key sealed under another key encryption key, which serve
	// with the test key then cannot open.
	sealedElsewhere := dbtest.NewURL(t)
	const otherKey = "b3RoZXIta2VrLWZvci10aGUtdGVzdHMtMDAwMDAwMDE="
	if _, err := flowdtest.RunCLI(func(k string) string {
		return map[string]string{"DATABASE_URL": sealedElsewhere, "FLOWD_KEY_ENCRYPTION_KEY": otherKey,
			"FLOWD_SESSION_KEY": flowdtest.TestSessionKey, "FLOWD_DATA_KEY": flowdtest.TestDataKey}[k]
	}, "", "keys", "rotate"); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"the address is taken", map[string]string{"FLOWD_ADDR": taken.Addr().String()}, "listen"},
		{"the profiler's address is taken", map[string]string{"FLOWD_PPROF_ADDR": taken.Addr().String()}, "FLOWD_PPROF_ADDR"},
		{"the signing key does not open", map[string]string{"DATABASE_URL": sealedElsewhere}, "identity"},
	}
	http.DefaultClient.CloseIdleConnections()
	before := goleak.IgnoreCurrent()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, pprofAddr := flowdtest.FreeAddr(t), flowdtest.FreeAddr(t)
			env := map[string]string{
				"DATABASE_URL":             dbURL,
				"FLOWD_ADDR":               addr,
				"FLOWD_PPROF_ADDR":         pprofAddr,
				"FLOWD_KEY_ENCRYPTION_KEY": flowdtest.TestKeyEncryptionKey,
				"FLOWD_SESSION_KEY":        flowdtest.TestSessionKey,
				"FLOWD_DATA_KEY":           flowdtest.TestDataKey,
			}
			for k, v := range tt.env {
				env[k] = v
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel() // only after the checks: serve must not rely on it
			var logs bytes.Buffer
			err := app.Run(ctx, []string{"serve"}, func(k string) string { return env[k] }, strings.NewReader(""), &logs, &logs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve: %v, want an error naming %q\n%s", err, tt.want, logs.String())
			}
			for _, a := range []string{env["FLOWD_ADDR"], env["FLOWD_PPROF_ADDR"]} {
				if a == taken.Addr().String() {
					continue
				}
				ln, err := net.Listen("tcp", a)
				if err != nil {
					t.Errorf("%s is still in use after serve returned: %v", a, err)
					continue
				}
				ln.Close()
			}
			goleak.VerifyNone(t, before)
		})
	}
}

// TestServeJoinsEveryGoroutine runs serve to a normal stop and checks that
// no goroutine it started outlives it.
// Not parallel: goleak sees every goroutine of the process.
func TestServeJoinsEveryGoroutine(t *testing.T) {
	dbURL := dbtest.NewURL(t)
	http.DefaultClient.CloseIdleConnections()
	before := goleak.IgnoreCurrent()
	in := flowdtest.Start(t, flowdtest.WithDatabase(dbURL), flowdtest.WithEnv("FLOWD_PPROF_ADDR", flowdtest.FreeAddr(t)))
	if resp, body := get(t, in.URL+"/api/openapi.json", ""); resp.StatusCode != 200 {
		t.Fatalf("openapi.json: %d %s", resp.StatusCode, body)
	}
	in.Stop(t)
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, before)
}
