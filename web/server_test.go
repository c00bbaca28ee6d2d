package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/internal/config"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/web"
	"github.com/flowd/flowd/web/internal/httpkit"
	"github.com/flowd/flowd/web/internal/webtest"
)

// testServer is what each test of this package starts from.
type testServer struct {
	srv   *webtest.Server
	url   string
	proxy *dbtest.Proxy
}

// setup builds the real server on a fresh database reached through a proxy
// the test can cut.
func setup(t *testing.T) testServer {
	t.Helper()
	return setupWith(t, func(string) string { return "" })
}

// setupWith starts the server with the settings getenv gives.
func setupWith(t *testing.T, getenv config.Getenv) testServer {
	t.Helper()
	proxy, url := dbtest.NewProxy(t, dbtest.NewURL(t))
	pool, err := database.Open(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cfg, err := config.Load(getenv, config.Need{})
	if err != nil {
		t.Fatal(err)
	}
	srv := webtest.NewServer(t, web.Deps{Config: cfg, Pool: pool})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return testServer{srv: srv, url: hs.URL, proxy: proxy}
}

func do(t *testing.T, method, url, contentType, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestReadinessFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	// Its checks have two seconds, which a loaded machine may not give them.
	testwait.For(t, "readyz with the database up", func() (bool, string) {
		resp, body := do(t, "GET", ts.url+"/readyz", "", "")
		return resp.StatusCode == 200, fmt.Sprintf("%d %s", resp.StatusCode, body)
	})
	ts.proxy.Cut()
	resp, body := do(t, "GET", ts.url+"/readyz", "", "")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "unreachable") {
		t.Fatalf("readyz with the database gone: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, _ := do(t, "GET", ts.url+"/healthz", "", ""); resp.StatusCode != 200 {
		t.Fatalf("healthz must not depend on the database: %d", resp.StatusCode)
	}
	ts.proxy.Restore()
	deadline := testwait.Deadline(t)
	for {
		resp, body := do(t, "GET", ts.url+"/readyz", "", "")
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz did not recover: %d %s", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestLostDatabaseAnswers503WithRetryAfter(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.srv.Echo().GET("/api/test-query", func(c echo.Context) error {
		var one int
		if err := ts.srv.Deps.Pool.QueryRow(c.Request().Context(), "select 1").Scan(&one); err != nil {
			return err
		}
		return httpkit.WriteJSON(c, 200, map[string]int{"one": one})
	})
	ts.proxy.Cut()
	resp, body := do(t, "GET", ts.url+"/api/test-query", "", "")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("query with the database gone: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	ts.proxy.Restore()
	deadline := testwait.Deadline(t)
	for {
		resp, _ := do(t, "GET", ts.url+"/api/test-query", "", "")
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the query did not recover: %d", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type testBody struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	On    bool   `json:"on"`
}

func TestDecodeJSONNamesEveryOffendingField(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.srv.Echo().POST("/api/test-decode", func(c echo.Context) error {
		var b testBody
		if err := httpkit.DecodeJSON(c, &b); err != nil {
			return err
		}
		return httpkit.WriteJSON(c, 200, b)
	})
	url := ts.url + "/api/test-decode"
	type fieldErr struct{ Field, Message string }
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		fields      []string
	}{
		{"good", "application/json", `{"name":"a","count":2,"on":true}`, 200, nil},
		{"charset is fine", "application/json; charset=utf-8", `{"name":"a"}`, 200, nil},
		{"not json", "text/plain", `{"name":"a"}`, 415, nil},
		{"no content type", "", `{"name":"a"}`, 415, nil},
		{"malformed", "application/json", `{"name":`, 400, []string{""}},
		{"array", "application/json", `[1]`, 400, []string{""}},
		{"trailing data", "application/json", `{"name":"a"} {}`, 400, []string{""}},
		{"every bad field", "application/json", `{"name":1,"count":"x","extra":true,"on":"yes"}`, 400, []string{"count", "extra", "name", "on"}},
		{"invalid utf-8", "application/json", "{\"name\":\"\xff\"}", 400, []string{""}},
		{"too large", "application/json", `{"name":"` + strings.Repeat("a", 70<<10) + `"}`, 413, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, "POST", url, tt.contentType, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.status == 200 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("content type %q", ct)
			}
			var p struct {
				Status int        `json:"status"`
				Errors []fieldErr `json:"errors"`
			}
			if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != tt.status {
				t.Fatalf("problem %s: %v", body, err)
			}
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Field)
			}
			if strings.Join(got, ",") != strings.Join(tt.fields, ",") {
				t.Fatalf("fields %v, want %v (%s)", got, tt.fields, body)
			}
		})
	}
}

// Strict-Transport-Security goes out only when flowd is reached over HTTPS,
// and answers do not share a header value that one of them changed.
func TestHTTPSBaseURLAddsStrictTransportSecurity(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		base string
		want string
	}{
		{"https://flowd.example", "max-age=31536000"},
		{"http://localhost:8080", ""},
	} {
		ts := setupWith(t, func(k string) string {
			if k == "FLOWD_BASE_URL" {
				return tt.base
			}
			return ""
		})
		for range 2 {
			resp, _ := do(t, "GET", ts.url+"/healthz", "", "")
			if got := resp.Header.Get("Strict-Transport-Security"); got != tt.want {
				t.Fatalf("%s: Strict-Transport-Security %q, want %q", tt.base, got, tt.want)
			}
			if got := resp.Header.Values("X-Frame-Options"); len(got) != 1 || got[0] != "DENY" {
				t.Fatalf("%s: X-Frame-Options %q", tt.base, got)
			}
		}
	}
}

func TestEveryResponseCarriesSecurityHeadersAndARequestID(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	for _, path := range []string{"/healthz", "/nowhere", "/api/nowhere"} {
		resp, _ := do(t, "GET", ts.url+path, "", "")
		for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy", "X-Frame-Options", "X-Request-Id"} {
			if resp.Header.Get(h) == "" {
				t.Errorf("%s: no %s header", path, h)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: weak CSP %q", path, csp)
		}
	}
	req, _ := http.NewRequest("GET", ts.url+"/healthz", nil)
	req.Header.Set("X-Request-Id", "abc-123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Request-Id"); got != "abc-123" {
		t.Fatalf("request id not kept: %q", got)
	}
}

func TestPanicsBecomeInternalProblems(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.srv.Echo().GET("/api/test-panic", func(c echo.Context) error { panic("boom: secret detail") })
	resp, body := do(t, "GET", ts.url+"/api/test-panic", "", "")
	if resp.StatusCode != 500 || strings.Contains(body, "secret detail") || !strings.Contains(body, resp.Header.Get("X-Request-Id")) {
		t.Fatalf("panic: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, "GET", ts.url+"/healthz", "", ""); resp.StatusCode != 200 {
		t.Fatal("server did not survive the panic")
	}
}

func TestMethodNotAllowedIsAProblem(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	resp, body := do(t, "POST", ts.url+"/healthz", "application/json", "{}")
	if resp.StatusCode != 405 || !strings.Contains(body, `"type":"http://localhost:8080/docs#problem-method-not-allowed"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestShutdownLetsInFlightRequestsFinish(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, func(k string) string { return map[string]string{"FLOWD_SHUTDOWN_DELAY": "0"}[k] })
	started := make(chan struct{})
	ts.srv.Echo().GET("/test-slow", func(c echo.Context) error {
		close(started)
		time.Sleep(500 * time.Millisecond)
		return c.String(200, "finished")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ts.srv.Serve(ctx, ln) }()

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/test-slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-started
	cancel()
	r := <-got
	if r.err != nil || r.status != 200 || r.body != "finished" {
		t.Fatalf("in-flight request during shutdown: %+v", r)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Fatal("server still accepts connections after shutdown")
	}
}

// TestDrainingFailsReadinessWhileServing: once told to stop, the server
// answers /readyz with 503 and goes on serving for the shutdown delay, so
// that a load balancer takes it out of rotation before connections fail.
// The test ends the delay itself once it has seen the drain.
func TestDrainingFailsReadinessWhileServing(t *testing.T) {
	t.Parallel()
	const delay = 7 * time.Second
	ts := setupWith(t, func(k string) string { return map[string]string{"FLOWD_SHUTDOWN_DELAY": delay.String()}[k] })
	delayAsked := make(chan time.Duration, 1)
	delayOver := make(chan time.Time)
	web.SetDrainDelay(ts.srv.Server, func(d time.Duration) <-chan time.Time {
		delayAsked <- d
		return delayOver
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- ts.srv.Serve(ctx, ln) }()
	// Its checks have two seconds, which a loaded machine may not give them.
	testwait.For(t, "readyz before shutdown", func() (bool, string) {
		resp, body := do(t, "GET", url+"/readyz", "", "")
		return resp.StatusCode == 200, fmt.Sprintf("%d %s", resp.StatusCode, body)
	})

	cancel()
	testwait.For(t, "readyz to say draining", func() (bool, string) {
		resp, body := do(t, "GET", url+"/readyz", "", "")
		return resp.StatusCode == 503 && strings.Contains(body, `"status":"draining"`), fmt.Sprintf("%d %s", resp.StatusCode, body)
	})
	if resp, body := do(t, "GET", url+"/healthz", "", ""); resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("healthz while draining: %d, closing %v: %s", resp.StatusCode, resp.Close, body)
	}
	if d := <-delayAsked; d != delay {
		t.Fatalf("the drain waits %v, want FLOWD_SHUTDOWN_DELAY's %v", d, delay)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v before the delay was over", err)
	default:
	}
	close(delayOver)
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(time.Until(testwait.Deadline(t))):
		t.Fatal("Serve did not return after the delay")
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Fatal("the server still accepts connections after shutdown")
	}
}

// TestNewRefusesAMissingCollaborator: the server is built whole or not at all.
func TestNewRefusesAMissingCollaborator(t *testing.T) {
	t.Parallel()
	complete := webtest.NewServer(t, web.Deps{})
	d := complete.Deps
	d.Registry = prometheus.NewRegistry()
	if _, err := web.New(d); err != nil {
		t.Fatalf("every collaborator given: %v", err)
	}
	for name, drop := range map[string]func(*web.Deps){
		"Tokens":        func(d *web.Deps) { d.Tokens = nil },
		"Bearer":        func(d *web.Deps) { d.Bearer = nil },
		"JWKS":          func(d *web.Deps) { d.JWKS = nil },
		"Organizations": func(d *web.Deps) { d.Organizations = nil },
		"Clients":       func(d *web.Deps) { d.Clients = nil },
		"Audit":         func(d *web.Deps) { d.Audit = nil },
		"Limits":        func(d *web.Deps) { d.Limits = nil },
		"Flows":         func(d *web.Deps) { d.Flows = nil },
		"Endpoints":     func(d *web.Deps) { d.Endpoints = nil },
		"Consent":       func(d *web.Deps) { d.Consent = nil },
		"Withdrawals":   func(d *web.Deps) { d.Withdrawals = nil },
		"Definitions":   func(d *web.Deps) { d.Definitions = nil },
		"Receipts":      func(d *web.Deps) { d.Receipts = nil },
		"Login":         func(d *web.Deps) { d.Login = nil },
		"Sessions":      func(d *web.Deps) { d.Sessions = nil },
		"Pool":          func(d *web.Deps) { d.Pool = nil },
		"Idempotency":   func(d *web.Deps) { d.Idempotency = nil },
	} {
		without := d
		drop(&without)
		if _, err := web.New(without); err == nil || err.Error() != "web: New needs "+name {
			t.Errorf("without %s: %v", name, err)
		}
	}
}

// TestIPExtractor: X-Forwarded-For is read only from a trusted peer, from
// the right, past trusted hops; loopback and private peers are trusted only
// when listed.
func TestIPExtractor(t *testing.T) {
	t.Parallel()
	prefixes := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		peer    string
		xff     string
		want    string
	}{
		{"nothing trusted, a private peer", nil, "10.0.0.1:4000", "203.0.113.5", "10.0.0.1"},
		{"nothing trusted, a loopback peer", nil, "127.0.0.1:4000", "203.0.113.5", "127.0.0.1"},
		{"a trusted peer", prefixes("10.0.0.0/8"), "10.0.0.1:4000", "203.0.113.5", "203.0.113.5"},
		{"a trusted peer without the header", prefixes("10.0.0.0/8"), "10.0.0.1:4000", "", "10.0.0.1"},
		{"a made-up first hop", prefixes("10.0.0.0/8"), "10.0.0.1:4000", "198.51.100.1, 203.0.113.5", "203.0.113.5"},
		{"trusted hops skipped", prefixes("10.0.0.0/8"), "10.0.0.1:4000", "203.0.113.5, 10.9.9.9", "203.0.113.5"},
		{"an untrusted peer", prefixes("10.0.0.0/8"), "203.0.113.9:4000", "198.51.100.1", "203.0.113.9"},
		{"loopback not listed", prefixes("10.0.0.0/8"), "127.0.0.1:4000", "198.51.100.1", "127.0.0.1"},
		{"private not listed", prefixes("10.0.0.0/8"), "192.168.1.1:4000", "198.51.100.1", "192.168.1.1"},
		{"one address", prefixes("192.168.1.1/32"), "192.168.1.1:4000", "198.51.100.1", "198.51.100.1"},
		{"IPv6", prefixes("fd00::/8"), "[fd00::1]:4000", "2001:db8::7", "2001:db8::7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.peer
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			if got := web.IPExtractor(tc.trusted)(r); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}
