package main

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/flowdproc"
	"github.com/flowd/flowd/cmd/flowbench/internal/loadgen"
	"github.com/flowd/flowd/cmd/flowbench/internal/pgbench"
	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// scripts are the pgbench scripts, one per scenario, written from the SQL
// the store code executes for one request of that scenario.
//
//go:embed sql/*.sql
var scripts embed.FS

// Test secrets: the ones cmd/flowd/flowdtest uses. Never use them elsewhere.
const (
	testKeyEncryptionKey = "a2V5LWVuY3J5cHRpb24ta2V5LWZvci10ZXN0cy0wMDE="
	testSessionKey       = "c2Vzc2lvbi1rZXktZm9yLXRlc3RzLTAwMDAwMDAwMDE="
	testDataKey          = "ZGF0YS1rZXktZm9yLXRlc3RzLTAwMDAwMDAwMDAwMDE="
)

// org is an organization seeded through the CLI, with one API client.
type org struct {
	ID           string
	Prefix       string
	ClientID     string
	ClientSecret string
	// tokens obtains the client's bearer token and renews it before it expires.
	tokens oauth2.TokenSource
}

// bench is one run's flowd, database and clients.
type bench struct {
	o        options
	out      io.Writer
	tmp      string
	flowd    string // the built binary
	env      []string
	dbURL    string
	adminURL string
	dbName   string
	pgbench  string
	// postmasters are the pids of the cluster's postmasters (a Citus
	// cluster's coordinator and workers), none when they are not on this
	// machine: their processes are PostgreSQL's CPU (cpuNow).
	postmasters []string
	server      *flowdproc.Server
	base        string
	// main is the organization that creates; deep has o.deepFlows seeded
	// flows; writes takes pgbench's flows (see runPgbench).
	main, deep, writes org
	transport          *http.Transport
	load               *loadgen.Load
	// sealed holds the sealed columns of one real flow, hex-encoded for pgbench.
	pgVars map[string]string
	notes  []string
	// against is the -against build, which takes turns with this one:
	// swapAgainst makes it the flowd that server, base and load name.
	against *instance
	// moreResults are rows a scenario adds after its own: the -against
	// build's, ssf's poll.
	moreResults []Result
	// holder is the data holder benchHolder seeds, nil until then.
	holder *org
}

// instance is a flowd process with the load generator's connections to it.
type instance struct {
	server *flowdproc.Server
	base   string
	load   *loadgen.Load
}

// swapAgainst trades the flowd under load for the -against build.
func (b *bench) swapAgainst() {
	b.server, b.against.server = b.against.server, b.server
	b.base, b.against.base = b.against.base, b.base
	b.load, b.against.load = b.against.load, b.load
}

func (b *bench) note(format string, args ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, args...))
}

// newBench builds flowd, makes a fresh database on the cluster at adminURL,
// starts flowd on it and seeds the organizations every scenario uses.
func newBench(ctx context.Context, adminURL string, o options, out io.Writer) (_ *bench, err error) {
	b := &bench{o: o, out: out, adminURL: adminURL}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b.base = "http://127.0.0.1:" + strconv.Itoa(port)
	// The load generator first: off Linux it fails at once, before the build.
	if b.load, err = loadgen.New(b.base, o.concurrency); err != nil {
		return nil, err
	}
	if b.pgbench, err = pgbench.Find(); err != nil {
		return nil, err
	}
	if b.tmp, err = os.MkdirTemp("", "flowbench"); err != nil {
		return nil, err
	}
	b.flowd = filepath.Join(b.tmp, "flowd")
	fmt.Fprintln(out, "building flowd")
	build := exec.CommandContext(ctx, "go", "build", "-o", b.flowd, "./cmd/flowd")
	build.Stdout, build.Stderr = out, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("build flowd: %w", err)
	}

	if o.citus {
		// The cluster's own database, which has the citus extension on
		// every node: a new one would need it made on each.
		b.dbURL = adminURL
		if b.postmasters, err = citusPostmasters(ctx, adminURL); err != nil {
			return nil, err
		}
	} else if err := b.createDatabase(ctx); err != nil {
		return nil, err
	}

	b.env = []string{
		"DATABASE_URL=" + b.dbURL,
		"FLOWD_ADDR=127.0.0.1:" + strconv.Itoa(port),
		"FLOWD_BASE_URL=" + b.base,
		"FLOWD_KEY_ENCRYPTION_KEY=" + testKeyEncryptionKey,
		"FLOWD_SESSION_KEY=" + testSessionKey,
		"FLOWD_DATA_KEY=" + testDataKey,
		"FLOWD_LOG_LEVEL=warn",
		"FLOWD_WEBHOOK_ALLOW_PRIVATE=true",
		"FLOWD_ALLOW_INSECURE_URLS=true",
		"FLOWD_SHUTDOWN_DELAY=0", // no load balancer to wait for
		"FLOWD_TEST_EID=true",    // the person-page scenario signs in with it
		// The scenarios send far more than a client's default a minute: the
		// limit is counted on every request, as in production, but never reached.
		"FLOWD_API_RATE_LIMIT=1000000000",
	}
	if o.pprof != "" {
		b.env = append(b.env, "FLOWD_PPROF_ADDR="+o.pprof)
	}
	if o.citus {
		b.env = append(b.env, "FLOWD_CITUS=true")
	}
	b.env = append(b.env, o.env...)
	logFile, err := os.Create(filepath.Join(b.tmp, "flowd.log"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "starting flowd on", b.base, "database", cmp.Or(b.dbName, redact(b.dbURL)))
	if b.server, err = flowdproc.Start(ctx, b.flowd, b.base, b.env, logFile); err != nil {
		return nil, err
	}

	if o.against != "" {
		if b.against, err = b.startAgainst(ctx); err != nil {
			return nil, fmt.Errorf("-against %s: %w", o.against, err)
		}
	}
	b.transport = &http.Transport{MaxIdleConns: 4 * o.concurrency, MaxIdleConnsPerHost: 4 * o.concurrency, IdleConnTimeout: time.Minute}
	if b.main, err = b.seedOrg(ctx, "Bench Bank", "BENCH"); err != nil {
		return nil, err
	}
	if b.deep, err = b.seedOrg(ctx, "Deep Lender", "DEEP"); err != nil {
		return nil, err
	}
	if b.writes, err = b.seedOrg(ctx, "Pgbench Writes", "PGBW"); err != nil {
		return nil, err
	}
	if o.citus {
		if err := b.spreadOrgs(ctx); err != nil {
			return nil, fmt.Errorf("citus: %w", err)
		}
	}
	if err := b.seedDeep(ctx); err != nil {
		return nil, fmt.Errorf("seed %d flows: %w", o.deepFlows, err)
	}
	if err := b.reindexDeep(ctx); err != nil {
		return nil, fmt.Errorf("reindex the seeded flows: %w", err)
	}
	if err := b.rekeyDeep(ctx); err != nil {
		return nil, fmt.Errorf("rekey the seeded flows: %w", err)
	}
	return b, nil
}

// createDatabase makes the run's database on the cluster at b.adminURL.
func (b *bench) createDatabase(ctx context.Context) error {
	b.dbName = "flowbench_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	admin, err := pgx.Connect(ctx, b.adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(b.adminURL), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "create database "+pgx.Identifier{b.dbName}.Sanitize()); err != nil {
		return err
	}
	var backend int
	if err := admin.QueryRow(ctx, "select pg_backend_pid()").Scan(&backend); err != nil {
		return err
	}
	if pm := postmasterOf(strconv.Itoa(backend)); pm != "" {
		b.postmasters = []string{pm}
	}
	u, err := url.Parse(b.adminURL)
	if err != nil {
		return err
	}
	u.Path = "/" + b.dbName
	b.dbURL = u.String()
	return nil
}

// startAgainst builds flowd from the -against directory and starts it on
// the same database, with the same settings but its own address.
func (b *bench) startAgainst(ctx context.Context) (*instance, error) {
	bin := filepath.Join(b.tmp, "flowd-against")
	fmt.Fprintln(b.out, "building flowd in", b.o.against)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/flowd")
	build.Dir, build.Stdout, build.Stderr = b.o.against, b.out, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("build flowd: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	// FLOWD_BASE_URL stays this run's: it is the tokens' issuer.
	env := append(slices.Clone(b.env), "FLOWD_ADDR=127.0.0.1:"+strconv.Itoa(port))
	logFile, err := os.Create(filepath.Join(b.tmp, "flowd-against.log"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(b.out, "starting the -against flowd on", base)
	a := &instance{base: base}
	if a.server, err = flowdproc.Start(ctx, bin, base, env, logFile); err != nil {
		return nil, err
	}
	if a.load, err = loadgen.New(base, b.o.concurrency); err != nil {
		a.server.Stop()
		return nil, err
	}
	return a, nil
}

// close stops flowd, drops the database and removes the build.
func (b *bench) close() {
	if b.load != nil {
		b.load.Close()
	}
	if b.server != nil {
		b.server.Stop()
	}
	if b.against != nil {
		b.against.load.Close()
		b.against.server.Stop()
	}
	if b.dbName != "" && !b.o.keep {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if admin, err := pgx.Connect(ctx, b.adminURL); err == nil {
			_, _ = admin.Exec(ctx, "drop database if exists "+pgx.Identifier{b.dbName}.Sanitize()+" with (force)")
			admin.Close(ctx)
		}
	}
	if b.tmp != "" {
		if b.o.keep {
			fmt.Fprintln(b.out, "kept", b.tmp, "and database", b.dbName)
		} else {
			os.RemoveAll(b.tmp)
		}
	}
}

// cli runs a flowd admin command with --json and decodes its answer.
func (b *bench) cli(ctx context.Context, v any, args ...string) error {
	cmd := exec.CommandContext(ctx, b.flowd, append(args, "--json")...)
	cmd.Env = append(os.Environ(), b.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("flowd %v: %w: %s", args, err, stderr.String())
	}
	return json.Unmarshal(out, v)
}

// seedOrg creates an organization and an API client through the CLI, and an
// HTTP client that authenticates as that API client would: client
// credentials at the token endpoint, the token reused until it expires.
func (b *bench) seedOrg(ctx context.Context, name, prefix string) (org, error) {
	var o struct {
		ID              string `json:"id"`
		ReferencePrefix string `json:"referencePrefix"`
	}
	if err := b.cli(ctx, &o, "orgs", "create", "--name", name, "--prefix", prefix); err != nil {
		return org{}, err
	}
	var c struct {
		ClientID     string `json:"clientId"`
		ClientSecret string `json:"clientSecret"`
	}
	if err := b.cli(ctx, &c, "clients", "create", "--org", o.ID, "--name", "flowbench"); err != nil {
		return org{}, err
	}
	r := org{ID: o.ID, Prefix: o.ReferencePrefix, ClientID: c.ClientID, ClientSecret: c.ClientSecret}
	cc := &clientcredentials.Config{ClientID: r.ClientID, ClientSecret: r.ClientSecret, TokenURL: b.base + "/oauth/token"}
	r.tokens = cc.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient,
		&http.Client{Transport: b.transport, Timeout: 30 * time.Second}))
	// The first token is fetched here so that no scenario pays for it.
	if _, err := r.tokens.Token(); err != nil {
		return org{}, fmt.Errorf("token for %s: %w", name, err)
	}
	return r, nil
}

// request is a request as o's client, with its current token.
func (o org) request(method, path string, body []byte, want int) (loadgen.Request, error) {
	tok, err := o.tokens.Token()
	if err != nil {
		return loadgen.Request{}, err
	}
	return loadgen.Request{Method: method, Path: path, Header: loadgen.Bearer(tok.AccessToken), Body: body, Want: want}, nil
}

// do sends one request as o's client outside the load and returns the
// body of its answer; a status other than want is an error.
func (b *bench) do(ctx context.Context, o org, method, path string, body []byte, want int) ([]byte, error) {
	tok, err := o.tokens.Token()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Transport: b.transport, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, truncate(out, 200))
	}
	return out, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// startPgbench starts pgbench on a scenario's script(s) (name, or
// "name@weight" each; "a+b" is script a followed by script b, in one
// transaction of pgbench's) with the run's concurrency, warmed up and
// paused for its turns.
func (b *bench) startPgbench(ctx context.Context, vars map[string]string, files ...string) (*pgbench.Session, error) {
	dir := filepath.Join(b.tmp, "sql")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range files {
		name, weight, _ := cutWeight(f)
		var src []byte
		for _, part := range strings.Split(name, "+") {
			script, err := scripts.ReadFile("sql/" + part + ".sql")
			if err != nil {
				return nil, err
			}
			src = append(src, script...)
		}
		p := filepath.Join(dir, name+".sql")
		if err := os.WriteFile(p, src, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p+weight)
	}
	// pgbench's flows go to an organization of their own: their sealed
	// columns are one real flow's, sealed for that flow's id, and would not
	// open as another flow's in the lists flowd serves between pgbench's turns.
	all := map[string]string{"writeorg": b.writes.ID, "scopes": "{flows:read,flows:write,flows:delete}", "zerots": "0001-01-01 00:00:00+00",
		"hookurl": "http://127.0.0.1:9/hook", "redirect": "https://example.com/done", "generic": genericPlans(b.o.citus)}
	for k, v := range b.pgVars {
		all[k] = v
	}
	for k, v := range vars {
		all[k] = v
	}
	return pgbench.Start(ctx, b.pgbench, b.dbURL, b.tmp, paths, all, b.o.concurrency)
}

// genericPlans is the scripts' generic variable: whether their shared
// reads ask for generic plans, as flowd's do except on Citus.
func genericPlans(citus bool) string {
	if citus {
		return "0"
	}
	return "1"
}

// pgbenchTurn is one turn of pg for d.
func (b *bench) pgbenchTurn(pg *pgbench.Session, d time.Duration) error {
	return pg.Turn(d, func() time.Duration { return b.cpuNow().postgres })
}

func cutWeight(f string) (name, weight string, ok bool) {
	for i := len(f) - 1; i >= 0; i-- {
		if f[i] == '@' {
			return f[:i], f[i:], true
		}
	}
	return f, "", false
}

// hexBytea renders b as PostgreSQL's bytea hex input.
func hexBytea(b []byte) string { return `\x` + hex.EncodeToString(b) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// redact drops a URL's password.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(database URL)"
	}
	return u.Redacted()
}

func mustDecode(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// exec runs one statement on the run's database.
func (b *bench) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}
