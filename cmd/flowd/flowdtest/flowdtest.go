// Package flowdtest starts the real flowd — app.Run("serve"), exactly what the
// binary runs — on a fresh test database and a free loopback port, for
// end-to-end tests over HTTP. Admin commands run through app.Run as well.
package flowdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/cmd/flowd/internal/app"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/syncbuf"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// Fixed secrets for tests: 32 bytes each, base64.
const (
	TestKeyEncryptionKey = "a2V5LWVuY3J5cHRpb24ta2V5LWZvci10ZXN0cy0wMDE="
	TestSessionKey       = "c2Vzc2lvbi1rZXktZm9yLXRlc3RzLTAwMDAwMDAwMDE="
	TestDataKey          = "ZGF0YS1rZXktZm9yLXRlc3RzLTAwMDAwMDAwMDAwMDE="
	// TestPasswordHash is the least argon2id cost flowd accepts for staff
	// passwords: the production code path at a fifth of the default's cost,
	// for suites that create and sign in staff by the dozen.
	TestPasswordHash = "m=19456,t=2,p=1"
)

// Instance is one running flowd.
type Instance struct {
	URL         string // base URL, e.g. http://127.0.0.1:43123
	DatabaseURL string
	Env         map[string]string
	Logs        *syncbuf.Buffer

	stdout   *syncbuf.Buffer // what serve prints, its address among it
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

// Option changes how an instance starts.
type Option func(*options)

type options struct {
	databaseURL string
	env         map[string]string
}

// WithDatabase starts on an existing database instead of a fresh one, e.g. a
// second instance sharing the first one's.
func WithDatabase(url string) Option { return func(o *options) { o.databaseURL = url } }

// WithEnv sets an environment variable of the instance.
func WithEnv(key, value string) Option { return func(o *options) { o.env[key] = value } }

// Start runs flowd serve and waits until /readyz answers 200. The instance is
// stopped gracefully at cleanup; its logs are printed when the test failed.
// A free port can be taken by another process before flowd binds it; flowd
// then starts again on another.
func Start(t testing.TB, opts ...Option) *Instance {
	t.Helper()
	o := options{env: map[string]string{}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.databaseURL == "" {
		o.databaseURL = dbtest.NewURL(t)
	}
	const attempts = 5
	for attempt := 1; ; attempt++ {
		in := start(o, FreeAddr(t))
		err := in.waitReady(t)
		if err == nil {
			t.Cleanup(func() {
				in.Stop(t)
				if t.Failed() {
					t.Logf("flowd logs of %s:\n%s", in.URL, in.Logs.String())
				}
			})
			return in
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == attempts {
			t.Fatalf("flowd serve exited before it was ready: %v\n%s", err, in.Logs.String())
		}
		t.Logf("%s was taken before flowd bound it; starting on another port", in.URL)
	}
}

// start runs flowd serve on addr with o's database and environment.
func start(o options, addr string) *Instance {
	base := "http://" + addr
	env := map[string]string{
		"DATABASE_URL":                o.databaseURL,
		"FLOWD_ADDR":                  addr,
		"FLOWD_BASE_URL":              base,
		"FLOWD_KEY_ENCRYPTION_KEY":    TestKeyEncryptionKey,
		"FLOWD_SESSION_KEY":           TestSessionKey,
		"FLOWD_DATA_KEY":              TestDataKey,
		"FLOWD_PASSWORD_HASH":         TestPasswordHash,
		"FLOWD_TEST_EID":              "true",
		"FLOWD_WEBHOOK_ALLOW_PRIVATE": "true",
		"FLOWD_LOG_LEVEL":             "debug",
		"FLOWD_SHUTDOWN_TIMEOUT":      "5s",
		"FLOWD_SHUTDOWN_DELAY":        "0", // no load balancer to wait for
		// Tests send thousands of requests a minute as one client: the rate
		// limit stays on, so that every request passes through it, but high.
		"FLOWD_API_RATE_LIMIT": "1000000",
	}
	for k, v := range o.env {
		env[k] = v
	}
	in := &Instance{URL: base, DatabaseURL: o.databaseURL, Env: env, Logs: &syncbuf.Buffer{}, stdout: &syncbuf.Buffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() {
		in.done <- app.Run(ctx, []string{"serve"}, in.Getenv, strings.NewReader(""), in.stdout, in.Logs)
	}()
	return in
}

// Getenv is the instance's environment.
func (in *Instance) Getenv(key string) string { return in.Env[key] }

// Stop ends the instance gracefully and waits for it; a second call does nothing.
func (in *Instance) Stop(t testing.TB) {
	t.Helper()
	in.stopOnce.Do(func() {
		in.cancel()
		select {
		case err := <-in.done:
			if err != nil {
				t.Errorf("flowd serve returned: %v", err)
			}
		case <-time.After(time.Until(testwait.Deadline(t))):
			t.Errorf("flowd did not stop before the test's deadline")
		}
	})
}

// waitReady waits until /readyz answers 200, for as long as the test may
// run: starting on a loaded machine is slow, not a failure. It returns the
// error flowd serve exited with when it stopped before it was ready.
func (in *Instance) waitReady(t testing.TB) error {
	t.Helper()
	var exited error
	testwait.For(t, "flowd at "+in.URL+" to be ready", func() (bool, string) {
		select {
		case err := <-in.done:
			in.done <- err
			if err == nil {
				err = errors.New("flowd serve returned without an error")
			}
			exited = err
			return true, ""
		default:
		}
		// Another test's flowd may answer at an address this one failed
		// to bind: only this one's own word counts.
		if !strings.Contains(in.stdout.String(), "flowd is serving on "+strings.TrimPrefix(in.URL, "http://")) {
			return false, "not serving yet"
		}
		resp, err := http.Get(in.URL + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("/readyz %d %s", resp.StatusCode, body)
	})
	return exited
}

// CLI runs an admin command of flowd with the instance's environment and
// returns its stdout; it fails the test when the command fails.
func (in *Instance) CLI(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := RunCLI(in.Getenv, stdin, args...)
	if err != nil {
		t.Fatalf("flowd %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// CLIJSON runs an admin command with --json and decodes its one JSON object.
func (in *Instance) CLIJSON(t testing.TB, args ...string) map[string]any {
	t.Helper()
	out := in.CLI(t, "", append(args, "--json")...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("flowd %s --json printed %q, not one JSON object (%v)", strings.Join(args, " "), out, err)
	}
	return m
}

// NoSuchFlow is an API route that answers 401 to a token it refuses and
// 404 to one it accepts.
const NoSuchFlow = "/api/flows/0b7e6f2a-3c1d-4e5f-9a8b-7c6d5e4f3a21"

// BearerStatus is the status of a GET of url with a bearer token.
func BearerStatus(t testing.TB, url, accessToken string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+accessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// RunCLI runs one flowd command with getenv and returns stdout and the
// command's error, with its stderr appended.
func RunCLI(getenv func(string) string, stdin string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := app.Run(ctx, args, getenv, strings.NewReader(stdin), &stdout, &stderr)
	if err != nil {
		return stdout.String(), fmt.Errorf("%w (stderr: %s)", err, stderr.String())
	}
	return stdout.String(), nil
}

// FreeAddr is a loopback address no one listens on, for a server to take.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
