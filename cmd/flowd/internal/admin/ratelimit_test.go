package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// TestClientRateLimitCommand shows, sets and resets an API client's rate
// limit with `clients rate-limit` while flowd serves: the running server
// holds the client's next requests to each new limit, which it learns from
// the database's notification; bad values are refused; a mapped external
// client takes a limit too; each change is audited.
func TestClientRateLimitCommand(t *testing.T) {
	t.Parallel()
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_API_RATE_LIMIT", "50"))
	orgID := in.CLIJSON(t, "orgs", "create", "--name", "Limit Bank")["id"].(string)
	client := in.CLIJSON(t, "clients", "create", "--org", orgID)
	id, sec := client["clientId"].(string), client["clientSecret"].(string)

	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {sec}}
	resp, err := http.PostForm(in.URL+"/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	// policy makes one API request and returns its status and RateLimit-Policy.
	policy := func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, in.URL+"/api/flows", nil)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("RateLimit-Policy")
	}
	// eventually polls the server until its policy is want.
	eventually := func(want string) {
		t.Helper()
		testwait.For(t, "RateLimit-Policy "+want, func() (bool, string) {
			_, got := policy()
			return got == want, "RateLimit-Policy " + got
		})
	}
	if status, p := policy(); status != http.StatusOK || p != `"default";q=50;w=60` {
		t.Fatalf("the default: %d %q", status, p)
	}
	if got := mustJSON(in.CLIJSON(t, "clients", "rate-limit", id)); got != `{"clientId":"`+id+`","default":true,"perMinute":50}` {
		t.Fatalf("clients rate-limit: %s", got)
	}

	if got := mustJSON(in.CLIJSON(t, "clients", "rate-limit", id, "--per-minute", "3")); got != `{"clientId":"`+id+`","default":false,"perMinute":3}` {
		t.Fatalf("clients rate-limit --per-minute 3: %s", got)
	}
	eventually(`"default";q=3;w=60`)
	// Of seven requests in a row, four or more fall in one minute's window
	// even when a window ends among them: one is refused.
	refused := false
	for range 7 {
		if status, _ := policy(); status == http.StatusTooManyRequests {
			refused = true
		}
	}
	if !refused {
		t.Fatal("seven requests in a row with a limit of three a minute were all admitted")
	}
	if list := mustJSON(in.CLIJSON(t, "clients", "list", "--org", orgID)); !strings.Contains(list, `"rateLimit":3`) {
		t.Fatalf("clients list: %s", list)
	}

	if out := in.CLI(t, "", "clients", "rate-limit", id, "--per-minute", "0"); !strings.Contains(out, "no limit") {
		t.Fatalf("clients rate-limit --per-minute 0: %q", out)
	}
	eventually("")
	if status, _ := policy(); status != http.StatusOK {
		t.Fatalf("without a limit: %d", status)
	}
	if out := in.CLI(t, "", "clients", "rate-limit", id, "--per-minute", "default"); !strings.Contains(out, "50 API requests per minute, the default") {
		t.Fatalf("clients rate-limit --per-minute default: %q", out)
	}
	eventually(`"default";q=50;w=60`)

	for _, args := range [][]string{
		{"clients", "rate-limit"},
		{"clients", "rate-limit", id, "--per-minute", "-1"},
		{"clients", "rate-limit", id, "--per-minute", "lots"},
		{"clients", "rate-limit", id, "--per-minute", "1000000001"},
		{"clients", "rate-limit", "fc_nosuchclient", "--per-minute", "5"},
		{"clients", "rate-limit", "ext-unmapped", "--issuer", "https://idp.example", "--per-minute", "5"},
	} {
		if _, err := flowdtest.RunCLI(in.Getenv, "", args...); err == nil {
			t.Fatalf("flowd %s succeeded", strings.Join(args, " "))
		}
	}

	in.CLIJSON(t, "clients", "map", "--org", orgID, "--issuer", "https://idp.example/", "--client-id", "ext-1")
	if got := mustJSON(in.CLIJSON(t, "clients", "rate-limit", "ext-1", "--issuer", "https://idp.example", "--per-minute", "7")); got != `{"clientId":"ext-1","default":false,"perMinute":7}` {
		t.Fatalf("an external client: %s", got)
	}
	if list := mustJSON(in.CLIJSON(t, "clients", "list", "--org", orgID)); !strings.Contains(list, `"clientId":"ext-1","createdAt"`) || !strings.Contains(list, `"rateLimit":7`) {
		t.Fatalf("clients list: %s", list)
	}

	conn, err := pgx.Connect(context.Background(), in.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "select count(*) from audit_log where action = 'client.rate_limit' and actor = 'operator:cli'").Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d client.rate_limit audit entries (%v), want 4", n, err)
	}
}
