package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/testwait"
	"github.com/flowd/flowd/internal/version"
)

// TestOperationsListener: with FLOWD_OPS_ADDR set, the metrics leave the
// public address for the operations listener, which serves health,
// readiness and the profiler too; /healthz says which build runs on both.
func TestOperationsListener(t *testing.T) {
	t.Parallel()
	opsAddr := flowdtest.FreeAddr(t)
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_OPS_ADDR", opsAddr))
	ops := "http://" + opsAddr

	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		if resp, body := get(t, in.URL+path, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("public %s with an operations listener: %d, want 404\n%.300s", path, resp.StatusCode, body)
		}
	}
	want := version.Get()
	for _, base := range []string{in.URL, ops} {
		resp, body := get(t, base+"/healthz", "")
		var h struct{ Status, Version string }
		if err := json.Unmarshal([]byte(body), &h); err != nil || resp.StatusCode != 200 || h.Status != "ok" || h.Version != want.Version {
			t.Errorf("%s/healthz: %d %s (%v), want status ok and version %q", base, resp.StatusCode, body, err, want.Version)
		}
	}
	testwait.For(t, "the operations listener's readyz to answer 200", func() (bool, string) {
		resp, body := get(t, ops+"/readyz", "")
		return resp.StatusCode == 200 && strings.Contains(body, `"migrations":"ok"`), fmt.Sprintf("%d %s", resp.StatusCode, body)
	})
	if resp, body := get(t, ops+"/debug/pprof/", ""); resp.StatusCode != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("ops /debug/pprof/: %d %.300s", resp.StatusCode, body)
	}
	resp, body := get(t, ops+"/metrics", "")
	build := fmt.Sprintf(`flowd_build_info{commit=%q,goversion=%q,version=%q} 1`, want.Commit, want.GoVersion, want.Version)
	for _, line := range []string{build, `flowd_db_up{pool="api"} 1`, `flowd_http_requests_total{method="GET",route="/healthz",status="200"} 1`} {
		if resp.StatusCode != 200 || !strings.Contains(body, line) {
			t.Errorf("ops /metrics (%d) lacks %s", resp.StatusCode, line)
		}
	}
	if t.Failed() {
		t.Logf("ops /metrics:\n%s", body)
	}
}

// TestMetricsOperatorsAlertOn runs flowd with a receiver that fails every
// delivery and checks, through the operations listener, the metrics that
// one client's work moves: the access token signed and a token refused,
// the decision and its receipt, the delivery retrying, its job's outcome
// and queue, and the endpoint failing.
func TestMetricsOperatorsAlertOn(t *testing.T) {
	t.Parallel()
	var attempts atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		attempts.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(receiver.Close)
	opsAddr := flowdtest.FreeAddr(t)
	in := flowdtest.Start(t, flowdtest.WithEnv("FLOWD_OPS_ADDR", opsAddr), flowdtest.WithEnv("FLOWD_CONSENT_AUTH", "none"),
		// One failure leaves its delivery waiting an hour for the next attempt.
		flowdtest.WithEnv("FLOWD_WEBHOOK_RETRY_SCHEDULE", "1h"))
	metrics := func() string {
		resp, body := get(t, "http://"+opsAddr+"/metrics", "")
		if resp.StatusCode != 200 {
			t.Fatalf("ops /metrics: %d %s", resp.StatusCode, body)
		}
		return body
	}

	var o struct{ ID string }
	if err := json.Unmarshal([]byte(in.CLI(t, "", "orgs", "create", "--name", "Acme Bank", "--prefix", "ACME", "--org-number", "987654321", "--json")), &o); err != nil {
		t.Fatal(err)
	}
	var c struct{ ClientID, ClientSecret string }
	if err := json.Unmarshal([]byte(in.CLI(t, "", "clients", "create", "--org", o.ID, "--json")), &c); err != nil {
		t.Fatal(err)
	}
	api := (&clientcredentials.Config{ClientID: c.ClientID, ClientSecret: c.ClientSecret, TokenURL: in.URL + "/oauth/token"}).
		Client(context.WithValue(context.Background(), oauth2.HTTPClient, http.DefaultClient))

	// A token that is no JWT is refused as malformed.
	req, _ := http.NewRequest("GET", in.URL+"/api/flows", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("a malformed token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	if code, body := send(t, api, "POST", in.URL+"/api/webhook-endpoints", `{"url":"`+receiver.URL+`/endpoint"}`); code != 201 {
		t.Fatalf("create endpoint: %d %s", code, body)
	}
	code, body := send(t, api, "POST", in.URL+"/api/flows", `{"nationalId":"12345678901","lastName":"Nordmann",`+
		`"redirectUrl":"https://bank.example/done","referenceName":"Mortgage","webhookUrl":"`+receiver.URL+`/flow"}`)
	var created struct {
		Links struct{ Consent struct{ Href string } } `json:"_links"`
	}
	if err := json.Unmarshal([]byte(body), &created); err != nil || code != 201 || created.Links.Consent.Href == "" {
		t.Fatalf("create flow: %d %s", code, body)
	}
	decide, _ := http.NewRequest("POST", created.Links.Consent.Href, strings.NewReader(url.Values{"decision": {"accept"}}.Encode()))
	decide.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	decide.Header.Set("Sec-Fetch-Site", "same-origin")
	decide.Header.Set("Origin", in.URL)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(decide)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusFound {
		t.Fatalf("decide: %d %s", resp.StatusCode, b)
	}

	at := func(body, series string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	atLeast := map[string]float64{
		`flowd_signatures_total{outcome="signed",use="access_token"}`:                                     1,
		`flowd_signatures_total{outcome="signed",use="receipt"}`:                                          1,
		`flowd_signatures_total{outcome="failed",use="receipt"}`:                                          0,
		`flowd_token_refusals_total{reason="malformed"}`:                                                  1,
		`flowd_consent_decisions_total{outcome="accepted"}`:                                               1,
		`flowd_consent_decisions_total{outcome="rejected"}`:                                               0,
		`flowd_river_jobs_worked_total{kind="flowd.webhook_delivery",outcome="retried",queue="webhooks"}`: 2,
		`flowd_webhook_deliveries{state="retrying"}`:                                                      2,
		`flowd_webhook_deliveries{state="due"}`:                                                           0,
		`flowd_webhook_oldest_due_delivery_seconds`:                                                       0,
		`flowd_river_jobs{queue="webhooks",state="retryable"}`:                                            2,
		`flowd_webhook_endpoints{state="failing"}`:                                                        1,
		`flowd_webhook_endpoints{state="disabled"}`:                                                       0,
		`flowd_db_pool_max_conns{pool="api"}`:                                                             1,
		`flowd_db_pool_max_conns{pool="webhooks"}`:                                                        1,
	}
	// The flow's own delivery and the endpoint's of flow.created, then those
	// of flow.accepted: each fails once and waits an hour.
	testwait.For(t, "the metrics to show the work", func() (bool, string) {
		body := metrics()
		var missing []string
		for series, least := range atLeast {
			if v := at(body, series); v < least {
				missing = append(missing, fmt.Sprintf("%s = %v, want at least %v", series, v, least))
			}
		}
		return len(missing) == 0, fmt.Sprintf("%d attempts received; %s", attempts.Load(), strings.Join(missing, "; "))
	})
}

// send sends body to u with hc and returns the status and the body.
func send(t *testing.T, hc *http.Client, method, u, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
