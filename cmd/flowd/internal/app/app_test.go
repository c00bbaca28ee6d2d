package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

func TestServeAnswersOverHTTP(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t)

	resp, body := get(t, in.URL+"/healthz", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	// Its checks have two seconds, which a loaded machine may not give them.
	testwait.For(t, "readyz to say the migrations are current", func() (bool, string) {
		resp, body = get(t, in.URL+"/readyz", "")
		return resp.StatusCode == 200 && strings.Contains(body, `"migrations":"ok"`), fmt.Sprintf("%d %s", resp.StatusCode, body)
	})

	resp, body = get(t, in.URL+"/api/flows", "")
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer realm="flowd"` {
		t.Fatalf("API route without a token: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	resp, body = get(t, in.URL+"/api/no-such-thing", "")
	if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("unknown API path: %d %s", resp.StatusCode, body)
	}

	resp, body = get(t, in.URL+"/no-such-thing", "application/json")
	if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("unknown path: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != 404 || !strings.HasSuffix(p.Type, "/docs#problem-not-found") || p.Title == "" {
		t.Fatalf("problem body %s (%v)", body, err)
	}

	resp, body = get(t, in.URL+"/no-such-page", "text/html,application/xhtml+xml")
	if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "<h1>Not found</h1>") {
		t.Fatalf("browser 404: %d %s", resp.StatusCode, body)
	}

	resp, body = get(t, in.URL+"/metrics", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `flowd_http_requests_total{method="GET",route="/healthz",status="200"} 1`) ||
		!strings.Contains(body, "flowd_db_pool_max_conns") || !strings.Contains(body, "flowd_http_request_duration_seconds_bucket") ||
		!strings.Contains(body, "flowd_db_reads_per_round_trip_bucket") {
		t.Fatalf("metrics lack request counts, latency, pool statistics or shared reads:\n%s", body)
	}

	resp, body = get(t, in.URL+"/assets/css/app.css", "")
	if resp.StatusCode != 200 || !strings.Contains(body, "--accent") {
		t.Fatalf("embedded stylesheet: %d", resp.StatusCode)
	}
}

func TestMigrateTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t) // already migrated once, as the template
	env := map[string]string{"DATABASE_URL": url}
	for range 2 {
		out, err := flowdtest.RunCLI(func(k string) string { return env[k] }, "", "migrate")
		if err != nil || !strings.Contains(out, "current") {
			t.Fatalf("migrate: %q %v", out, err)
		}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var version, rows int
	if err := conn.QueryRow(ctx, "select max(version), count(*) from schema_version").Scan(&version, &rows); err != nil {
		t.Fatal(err)
	}
	if version < 1 || rows != 1 {
		t.Fatalf("schema_version after two migrates: version %d in %d rows", version, rows)
	}
}

func TestServeRefusesBadSettingsWithOneLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no database", map[string]string{}, "DATABASE_URL"},
		{"no key", map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x"}, "FLOWD_KEY_ENCRYPTION_KEY"},
		{"bad ttl", map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x", "FLOWD_CONSENT_TTL": "forever"}, "FLOWD_CONSENT_TTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := flowdtest.RunCLI(func(k string) string { return tt.env[k] }, "", "serve")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve with %v: %v, want an error naming %s", tt.env, err, tt.want)
			}
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	if _, err := flowdtest.RunCLI(func(string) string { return "" }, "", "frobnicate"); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Fatalf("unknown command: %v", err)
	}
}

func get(t *testing.T, url, accept string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
