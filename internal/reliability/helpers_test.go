package reliability_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/testkit/syncbuf"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// long reports whether the long variants run (make test-reliability).
func long() bool { return os.Getenv("FLOWD_RELIABILITY_LONG") == "1" }

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
	buildOut  []byte
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// flowdBinary is the flowd the suite runs as processes of their own: the one
// FLOWD_TEST_BINARY names (make test builds it before the tests start, so
// that no test's time goes to compiling), or else cmd/flowd built once per
// test run, as `make build` would.
func flowdBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("FLOWD_TEST_BINARY"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		var root []byte
		root, buildErr = exec.Command("go", "env", "GOMOD").Output()
		if buildErr != nil {
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "flowd-reliability-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "flowd")
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/flowd")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return buildBin
}

// baseEnv is the environment every flowd of this suite runs with.
func baseEnv(dbURL, addr string) map[string]string {
	return map[string]string{
		"DATABASE_URL":                 dbURL,
		"FLOWD_ADDR":                   addr,
		"FLOWD_BASE_URL":               "http://" + addr,
		"FLOWD_KEY_ENCRYPTION_KEY":     flowdtest.TestKeyEncryptionKey,
		"FLOWD_SESSION_KEY":            flowdtest.TestSessionKey,
		"FLOWD_DATA_KEY":               flowdtest.TestDataKey,
		"FLOWD_PASSWORD_HASH":          flowdtest.TestPasswordHash,
		"FLOWD_TEST_EID":               "true",
		"FLOWD_WEBHOOK_ALLOW_PRIVATE":  "true",
		"FLOWD_WEBHOOK_TIMEOUT":        "2s",
		"FLOWD_WEBHOOK_RETRY_SCHEDULE": "300ms,500ms,1s,1s,2s,2s,3s,3s,5s,5s",
		"FLOWD_LOG_LEVEL":              "warn",
		"FLOWD_SHUTDOWN_TIMEOUT":       "5s",
		"FLOWD_DB_MAX_CONNS":           "8",
		// The load and kill tests send more than a client's default minute;
		// the limiter still counts every request.
		"FLOWD_API_RATE_LIMIT": "1000000",
	}
}

// getenvOf turns a map into a getenv for admin commands.
func getenvOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// process is one `flowd serve` subprocess of the built binary.
type process struct {
	URL  string
	Addr string
	Env  map[string]string
	Logs *syncbuf.Buffer
	cmd  *exec.Cmd
	done chan struct{}
}

// startFlowd runs `flowd serve` on dbURL at addr (a free one when empty) and
// waits until it says it serves there and /readyz answers 200. It is killed
// at cleanup. A free address can be taken by another test's process before
// flowd binds it: then it tries another.
func startFlowd(t *testing.T, dbURL, addr string, extra map[string]string) *process {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, taken := tryStartFlowd(t, dbURL, addr, extra)
		if !taken {
			return p
		}
		if attempt == 3 {
			t.Fatalf("flowd found no free address in %d tries:\n%s", attempt, p.Logs.String())
		}
	}
}

// tryStartFlowd is startFlowd's one try; taken reports that the address was
// in use, when startFlowd chose it.
func tryStartFlowd(t *testing.T, dbURL, addr string, extra map[string]string) (p *process, taken bool) {
	t.Helper()
	chosen := addr == ""
	if chosen {
		addr = flowdtest.FreeAddr(t)
	}
	env := baseEnv(dbURL, addr)
	for k, v := range extra {
		env[k] = v
	}
	p = &process{URL: "http://" + addr, Addr: addr, Env: env, Logs: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(flowdBinary(t), "serve")
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout = p.Logs
	p.cmd.Stderr = p.Logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			logs := p.Logs.String()
			if len(logs) > 20000 {
				logs = "…" + logs[len(logs)-20000:]
			}
			t.Logf("flowd %s logs:\n%s", addr, logs)
		}
	})
	testwait.For(t, "flowd at "+p.URL+" to be ready", func() (bool, string) {
		select {
		case <-p.done:
			if chosen && strings.Contains(p.Logs.String(), "address already in use") {
				taken = true
				return true, ""
			}
			t.Fatalf("flowd exited before it was ready:\n%s", p.Logs.String())
		default:
		}
		// Another test's flowd may answer at an address this one failed
		// to bind: only this one's own word counts.
		if !strings.Contains(p.Logs.String(), "flowd is serving on "+addr) {
			return false, "not serving yet"
		}
		resp, err := http.Get(p.URL + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "/readyz " + resp.Status
	})
	return p, taken
}

// startInstances runs n flowd processes on dbURL with extra settings. They
// share the first one's base URL, as instances behind one load balancer
// do: the issuer of tokens and the address of consent links.
func startInstances(t *testing.T, dbURL string, n int, extra map[string]string) []*process {
	t.Helper()
	ps := make([]*process, n)
	for i := range ps {
		env := maps.Clone(extra)
		if env == nil {
			env = map[string]string{}
		}
		if i > 0 {
			env["FLOWD_BASE_URL"] = ps[0].URL
		}
		ps[i] = startFlowd(t, dbURL, "", env)
	}
	return ps
}

// roundRobin hands out the instances' URLs in turn, as a load balancer
// would; it is safe for concurrent use.
func roundRobin(ps []*process) func() string {
	var turn atomic.Uint64
	return func() string { return ps[(turn.Add(1)-1)%uint64(len(ps))].URL }
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

// openPool opens a pool of the test's own on dbURL.
func openPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := database.Open(context.Background(), dbURL, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// tenant is an organization with one API client.
type tenant struct {
	OrgID         string
	WebhookSecret string
	ClientID      string
	ClientSecret  string
}

// newTenant creates an organization and an API client through the CLI.
func newTenant(t *testing.T, env map[string]string, name, prefix string, clientArgs ...string) tenant {
	t.Helper()
	out, err := flowdtest.RunCLI(getenvOf(env), "", "orgs", "create", "--name", name, "--prefix", prefix, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ ID, WebhookSecret string }
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("orgs create: %q: %v", out, err)
	}
	return tenant{OrgID: o.ID, WebhookSecret: o.WebhookSecret, ClientID: "", ClientSecret: ""}.withClient(t, env, clientArgs...)
}

func (tn tenant) withClient(t *testing.T, env map[string]string, args ...string) tenant {
	t.Helper()
	out, err := flowdtest.RunCLI(getenvOf(env), "", append([]string{"clients", "create", "--org", tn.OrgID, "--json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ ClientID, ClientSecret string }
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("clients create: %q: %v", out, err)
	}
	tn.ClientID, tn.ClientSecret = c.ClientID, c.ClientSecret
	return tn
}

// token gets an access token by client credentials.
func (tn tenant) token(t *testing.T, base string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {tn.ClientID}, "client_secret": {tn.ClientSecret}}
	resp, err := http.PostForm(base+"/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("token: %d %s", resp.StatusCode, body)
	}
	return tok.AccessToken
}

// answer is an HTTP response read in full.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.Body, v); err != nil {
		t.Fatalf("%d %s: %v", a.Status, a.Body, err)
	}
}

var httpClient = &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
	return http.ErrUseLastResponse
}}

// do sends one request with a bearer token; headers come in pairs.
func do(method, u, tok, body string, headers ...string) (answer, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		return answer{}, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// mustDo is do that fails the test on a transport error.
func mustDo(t *testing.T, method, u, tok, body string, headers ...string) answer {
	t.Helper()
	a, err := do(method, u, tok, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return a
}

// createBody is a valid create request.
func createBody(nationalID, lastName, webhookURL string) string {
	b, _ := json.Marshal(map[string]string{"nationalId": nationalID, "lastName": lastName,
		"redirectUrl": "https://bank.example/done", "webhookUrl": webhookURL})
	return string(b)
}

// delivery is one webhook request whose signature verified.
type delivery struct {
	ID     string
	Type   string
	FlowID string
	Body   string
}

// receiver is an organization's webhook endpoint: it verifies that every
// one of its secrets signed each request and records what arrived; status
// decides what it answers.
type receiver struct {
	t       *testing.T
	secrets []string
	srv     *httptest.Server
	mu      sync.Mutex
	got     []delivery
	arrived int // requests that verified, answered or not
	failed  int
	status  int           // 0 answers 204
	held    chan struct{} // when set, requests are answered only once it is closed
}

func newReceiver(t *testing.T, secrets ...string) *receiver {
	r := &receiver{t: t, secrets: secrets}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// hold makes the receiver keep every request waiting for an answer until
// release is called, at cleanup at the latest.
func (r *receiver) hold() (release func()) {
	held := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	r.t.Cleanup(release) // runs before the server closes, which waits for its handlers
	r.mu.Lock()
	r.held = held
	r.mu.Unlock()
	return release
}

func (r *receiver) URL() string { return r.srv.URL + "/hooks" }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id, ts, sig := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature")
	for _, secret := range r.secrets {
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "." + string(body)))
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if !strings.Contains(" "+sig+" ", " "+want+" ") {
			r.t.Errorf("webhook %s: signature %q does not verify with every secret", id, sig)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
	}
	var ev struct {
		Type string `json:"type"`
		Data struct {
			FlowID string `json:"flowId"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("webhook %s: body %s: %v", id, body, err)
	}
	r.mu.Lock()
	r.arrived++
	held := r.held
	r.mu.Unlock()
	if held != nil {
		<-held
	}
	r.mu.Lock()
	status := r.status
	if status == 0 || status/100 == 2 {
		r.got = append(r.got, delivery{ID: id, Type: ev.Type, FlowID: ev.Data.FlowID, Body: string(body)})
	} else {
		r.failed++
	}
	r.mu.Unlock()
	if status == 0 {
		status = http.StatusNoContent
	}
	w.WriteHeader(status)
}

// setStatus makes the receiver answer status (0: 204 and record).
func (r *receiver) setStatus(status int) {
	r.mu.Lock()
	r.status = status
	r.mu.Unlock()
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// arrivals counts the requests that verified, answered or still held.
func (r *receiver) arrivals() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.arrived
}

func (r *receiver) failures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// eventually polls cond until it holds, failing the test when its deadline
// is near.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, func() (bool, string) { return cond(), "it did not happen" })
}

// count runs a count(*) query.
func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}
