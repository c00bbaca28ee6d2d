package app_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/cmd/flowd/internal/app"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// TestServeDrainsBeforeItStops: once serve's context ends, it drains for
// FLOWD_SHUTDOWN_DELAY before it stops, so that a load balancer takes the
// instance out of rotation before connections fail. What the server does
// while draining (readiness 503, requests still served) web's tests check
// with a delay they end themselves; this checks that serve passes the
// setting on, by how long serve takes and by what it logs.
func TestServeDrainsBeforeItStops(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_SHUTDOWN_DELAY", delay.String()))
	// Its checks have two seconds, which a loaded machine may not give them.
	testwait.For(t, "readyz before stopping", func() (bool, string) {
		resp, body := get(t, in.URL+"/readyz", "")
		return resp.StatusCode == 200, fmt.Sprintf("%d %s", resp.StatusCode, body)
	})
	stopping := time.Now()
	in.Stop(t)
	if took := time.Since(stopping); took < delay {
		t.Fatalf("serve returned %v after its context ended, before the delay of %v", took, delay)
	}
	if logs := in.Logs.String(); !strings.Contains(logs, `"msg":"draining: not ready, still serving","delay":"2s"`) {
		t.Fatalf("serve did not log its drain of %v:\n%s", delay, logs)
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
		{"the operations address is taken", map[string]string{"FLOWD_OPS_ADDR": taken.Addr().String()}, "FLOWD_OPS_ADDR"},
		{"the signing key does not open", map[string]string{"DATABASE_URL": sealedElsewhere}, "identity"},
	}
	http.DefaultClient.CloseIdleConnections()
	before := goleak.IgnoreCurrent()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, pprofAddr, opsAddr := flowdtest.FreeAddr(t), flowdtest.FreeAddr(t), flowdtest.FreeAddr(t)
			env := map[string]string{
				"DATABASE_URL":             dbURL,
				"FLOWD_ADDR":               addr,
				"FLOWD_PPROF_ADDR":         pprofAddr,
				"FLOWD_OPS_ADDR":           opsAddr,
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
			for _, a := range []string{env["FLOWD_ADDR"], env["FLOWD_PPROF_ADDR"], env["FLOWD_OPS_ADDR"]} {
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
	in := flowdtest.Start(t, flowdtest.WithDatabase(dbURL), flowdtest.WithEnv("FLOWD_PPROF_ADDR", flowdtest.FreeAddr(t)),
		flowdtest.WithEnv("FLOWD_OPS_ADDR", flowdtest.FreeAddr(t)))
	if resp, body := get(t, in.URL+"/api/openapi.json", ""); resp.StatusCode != 200 {
		t.Fatalf("openapi.json: %d %s", resp.StatusCode, body)
	}
	in.Stop(t)
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, before)
}
