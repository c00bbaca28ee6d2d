package webhooks_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/dbtest"
	"github.com/flowd/flowd/internal/flowdtest"
	"github.com/flowd/flowd/modules/webhooks"
)

// publisher returns an unstarted module on the database at url (as flows
// would use inside serve) with the organization's secret made.
func publisher(t *testing.T, url string) *bundle {
	t.Helper()
	pool, err := database.Open(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return newBundle(t, pool)
}

// TestTwoInstancesDeliverOnce: two flowd servers on one database share the
// deliveries; in the normal case each event arrives exactly once.
func TestTwoInstancesDeliverOnce(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	a := flowdtest.Start(t, flowdtest.WithDatabase(url))
	c := flowdtest.Start(t, flowdtest.WithDatabase(url))
	b := publisher(t, url)
	rcv := newReceiver(t, b.secret)
	const n = 30
	var evs []webhooks.Event
	for i := range n {
		evs = append(evs, b.event(webhooks.FlowCreated, "flow-"+strconvI(i), rcv.URL()))
	}
	publish(t, b.pool, b.hooks, evs...)
	eventually(t, "every event delivered", func() bool {
		var pending int
		err := b.pool.QueryRow(context.Background(), "select count(*) from webhook_events where state <> 'delivered'").Scan(&pending)
		return err == nil && pending == 0
	})
	seen := map[string]int{}
	for _, d := range rcv.Deliveries() {
		seen[d.ID]++
	}
	if len(seen) != n {
		t.Errorf("distinct webhook-ids = %d, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("event %s delivered %d times, want once", id, c)
		}
	}
	// Each instance counts its deliveries in /metrics; together, all of them.
	if got := deliveredMetric(t, a.URL) + deliveredMetric(t, c.URL); got != n {
		t.Errorf(`flowd_webhook_deliveries_total{outcome="delivered"} sums to %v, want %d`, got, n)
	}
}

// deliveredMetric reads the delivered-deliveries counter of an instance.
func deliveredMetric(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "flowd_webhook_delivery_duration_seconds") {
		t.Errorf("%s/metrics lacks the webhook delivery histogram", base)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `flowd_webhook_deliveries_total{outcome="delivered"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// TestKilledServerLosesNothing: a flowd process killed (SIGKILL) while
// deliveries are in flight loses none; the next process delivers them all,
// duplicates carrying the same webhook-id.
func TestKilledServerLosesNothing(t *testing.T) {
	t.Parallel()
	bin := buildFlowd(t)
	url := dbtest.NewURL(t)
	b := publisher(t, url)

	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	rcv := newReceiver(t, b.secret)
	t.Cleanup(unblock) // runs before the receiver closes, which waits for its handlers
	rcv.respond = func(delivery, int) int {
		<-release
		return http.StatusOK
	}

	first := startProcess(t, bin, url)
	const n = 5
	var evs []webhooks.Event
	for i := range n {
		evs = append(evs, b.event(webhooks.FlowAccepted, "flow-"+strconvI(i), rcv.URL()))
	}
	publish(t, b.pool, b.hooks, evs...)
	eventually(t, "deliveries in flight", func() bool { return rcv.Arrived() >= n })
	first.kill(t)
	unblock()

	startProcess(t, bin, url)
	eventually(t, "every event delivered after the restart", func() bool {
		var pending int
		err := b.pool.QueryRow(context.Background(), "select count(*) from webhook_events where state <> 'delivered'").Scan(&pending)
		return err == nil && pending == 0
	})
	byFlow := map[string]map[string]bool{}
	for _, d := range rcv.Deliveries() {
		flow, _ := d.Payload.Data["flowId"].(string)
		if byFlow[flow] == nil {
			byFlow[flow] = map[string]bool{}
		}
		byFlow[flow][d.ID] = true
	}
	for _, ev := range evs {
		id := eventID(t, b.pool, ev.FlowID, ev.Type)
		ids := byFlow[ev.FlowID]
		if len(ids) != 1 || !ids[id] {
			t.Errorf("%s arrived with webhook-ids %v, want only %s", ev.FlowID, ids, id)
		}
		if c := rcv.count(id, 0, 1000); c < 2 {
			t.Errorf("%s arrived %d times, want the interrupted delivery and its redelivery", ev.FlowID, c)
		}
	}
}

// TestRotateWebhookSecretCLI: "flowd orgs rotate-webhook-secret" prints the
// new secret, which then signs; an unknown organization is an error.
func TestRotateWebhookSecretCLI(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	b := publisher(t, url)
	env := func(k string) string {
		return map[string]string{
			"DATABASE_URL":             url,
			"FLOWD_KEY_ENCRYPTION_KEY": flowdtest.TestKeyEncryptionKey,
			"FLOWD_SESSION_KEY":        flowdtest.TestSessionKey,
			"FLOWD_DATA_KEY":           flowdtest.TestDataKey,
		}[k]
	}
	out, err := flowdtest.RunCLI(env, "", "orgs", "rotate-webhook-secret", "--org", b.org, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 || !strings.HasPrefix(got["webhookSecret"], "whsec_") {
		t.Fatalf("output %q: %v; want {\"webhookSecret\":\"whsec_…\"}", out, err)
	}
	cur, err := b.hooks.CurrentSecret(context.Background(), b.org)
	if err != nil || cur.Value != got["webhookSecret"] || cur.Value == b.secret {
		t.Errorf("current secret %q, %v; want the printed one", cur.Value, err)
	}
	out, err = flowdtest.RunCLI(env, "", "orgs", "rotate-webhook-secret", "--org", b.org)
	if err != nil || !strings.Contains(out, "whsec_") || !strings.Contains(out, "24 hours") {
		t.Errorf("human output %q, %v", out, err)
	}
	if _, err := flowdtest.RunCLI(env, "", "orgs", "rotate-webhook-secret", "--org", "org-unknown", "--json"); err == nil {
		t.Error("rotating an unknown organization's secret succeeded")
	}
	if _, err := flowdtest.RunCLI(env, "", "orgs", "rotate-webhook-secret"); err == nil {
		t.Error("rotating without --org succeeded")
	}
}

func strconvI(i int) string { return string(rune('a'+i/26)) + string(rune('a'+i%26)) }

// buildFlowd builds the flowd binary into a temporary folder.
func buildFlowd(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "flowd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/flowd")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is a flowd serve subprocess.
type process struct {
	cmd  *exec.Cmd
	logs *flowdtest.Buffer
	done chan struct{}
}

// startProcess runs "flowd serve" on the database at url with the settings
// flowdtest uses, and waits until it is ready. It is killed at cleanup.
func startProcess(t *testing.T, bin, url string) *process {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &process{logs: &flowdtest.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"DATABASE_URL=" + url,
		"FLOWD_ADDR=" + addr,
		"FLOWD_BASE_URL=http://" + addr,
		"FLOWD_KEY_ENCRYPTION_KEY=" + flowdtest.TestKeyEncryptionKey,
		"FLOWD_SESSION_KEY=" + flowdtest.TestSessionKey,
		"FLOWD_DATA_KEY=" + flowdtest.TestDataKey,
		"FLOWD_TEST_EID=true",
		"FLOWD_WEBHOOK_ALLOW_PRIVATE=true",
		"FLOWD_WEBHOOK_TIMEOUT=2s",
		"FLOWD_LOG_LEVEL=debug",
		"FLOWD_SHUTDOWN_TIMEOUT=5s",
	}
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("flowd %s logs:\n%s", addr, p.logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			t.Fatalf("flowd exited before it was ready:\n%s", p.logs.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("flowd was not ready within 60s:\n%s", p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the process with SIGKILL, no graceful stop, and waits for it.
func (p *process) kill(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Logf("kill: %v", err)
	}
	<-p.done
}
