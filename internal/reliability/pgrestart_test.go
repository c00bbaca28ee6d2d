package reliability_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// cluster is a PostgreSQL cluster of one test's own, so that the test can
// shut it down without disturbing the cluster the other tests share. It is
// made the way scripts/pg.sh makes the test cluster (TEST_PG_BINDIR).
type cluster struct {
	bin, data, port string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	dbtest.AdminURL(t) // make sure we run under scripts/pg.sh
	bin := os.Getenv("TEST_PG_BINDIR")
	if bin == "" {
		t.Fatal("TEST_PG_BINDIR is not set: run the tests through scripts/pg.sh test (make test does)")
	}
	dir, err := os.MkdirTemp("", "flowd-reliability-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := flowdtest.FreeAddr(t)
	c := &cluster{bin: bin, data: filepath.Join(dir, "db"), port: addr[strings.LastIndex(addr, ":")+1:]}
	if err := os.Mkdir(c.data, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "-R", "postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	t.Cleanup(func() {
		_ = c.pgctl("-m", "immediate", "stop")
		os.RemoveAll(dir)
	})
	if out, err := c.asOwner(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
		"--locale=C.UTF-8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	conf, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Durability across a fast shutdown does not depend on fsync; speed does.
	_, err = conf.WriteString("fsync = off\nfull_page_writes = off\nmax_connections = 100\n")
	conf.Close()
	if err != nil {
		t.Fatal(err)
	}
	c.start(t)
	return c
}

func (c *cluster) asOwner(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func (c *cluster) pgctl(args ...string) error {
	out, err := c.asOwner(filepath.Join(c.bin, "pg_ctl"), append([]string{"-D", c.data, "-w", "-t", "60"}, args...)...).CombinedOutput()
	if err != nil {
		return &exec.ExitError{Stderr: out}
	}
	return nil
}

func (c *cluster) start(t *testing.T) {
	t.Helper()
	if err := c.pgctl("-l", filepath.Join(c.data, "server.log"), "-o",
		"-p "+c.port+" -k "+c.data+" -c listen_addresses=127.0.0.1", "start"); err != nil {
		t.Fatalf("pg_ctl start: %s", err.(*exec.ExitError).Stderr)
	}
}

// stopFast shuts the cluster down the way an operator's restart does:
// sessions are cut, committed work is kept.
func (c *cluster) stopFast(t *testing.T) {
	t.Helper()
	if err := c.pgctl("-m", "fast", "stop"); err != nil {
		t.Fatalf("pg_ctl stop: %s", err.(*exec.ExitError).Stderr)
	}
}

func (c *cluster) url() string {
	return "postgres://postgres@127.0.0.1:" + c.port + "/postgres?sslmode=disable"
}

// TestDatabaseRestartUnderLoad shuts PostgreSQL down (fast) while clients
// create flows: while it is gone flowd answers 503 with Retry-After (never a
// 500, never a hang), it recovers by itself when the database is back, and
// nothing acknowledged is lost or half made.
func TestDatabaseRestartUnderLoad(t *testing.T) {
	t.Parallel()
	pg := newCluster(t)
	p := startFlowd(t, pg.url(), "", nil)
	tn := newTenant(t, p.Env, "Restart Bank", "PGR")
	rcv := newReceiver(t, tn.WebhookSecret)
	tok := tn.token(t, p.URL)

	stop := make(chan struct{})
	l, wg := runLoad(t, func() string { return p.URL }, tok, rcv.URL(), 3, stop)
	eventually(t, "creates acknowledged before the restart", func() bool { return len(l.acknowledged()) >= 5 })
	pg.stopFast(t)
	downAt := len(l.results())
	// While the database is gone, every API call is a prompt 503 with Retry-After.
	for _, path := range []string{"/api/flows", "/api/flows?limit=5"} {
		a := mustDo(t, "GET", p.URL+path, tok, "")
		if a.Status != 503 || a.Header.Get("Retry-After") == "" || !strings.Contains(a.Header.Get("Content-Type"), "problem+json") {
			t.Errorf("GET %s while the database is down: %d Retry-After=%q %s", path, a.Status, a.Header.Get("Retry-After"), a.Body)
		}
	}
	if a := mustDo(t, "GET", p.URL+"/readyz", "", ""); a.Status != 503 {
		t.Errorf("/readyz while the database is down: %d", a.Status)
	}
	// The load meets the database down before it comes back.
	eventually(t, "a create answered while the database is down", func() bool {
		for _, o := range l.results()[downAt:] {
			if o.Status == 503 {
				return true
			}
		}
		return false
	})
	pg.start(t)
	eventually(t, "creates succeed again after the restart", func() bool {
		r := l.results()
		return len(r) > downAt && r[len(r)-1].Status == 201
	})
	upAt := len(l.acknowledged())
	eventually(t, "more creates acknowledged after the restart", func() bool { return len(l.acknowledged()) >= upAt+5 })
	close(stop)
	wg.Wait()

	unavailable := 0
	for _, o := range l.results() {
		switch {
		case o.Status == 201:
		case o.Status == 503 && o.RetryAfter != "":
			unavailable++
		default:
			t.Errorf("a create got %d (Retry-After %q); want 201, or 503 with Retry-After while the database is down", o.Status, o.RetryAfter)
		}
	}
	if unavailable == 0 {
		t.Error("no create saw the database down: the test did not test anything")
	}
	acked := l.acknowledged()
	t.Logf("%d requests, %d acknowledged, %d answered 503", len(l.results()), len(acked), unavailable)
	pool := openPool(t, pg.url())
	checkIntegrity(t, pool, acked)
	checkDelivered(t, pool, rcv)
}
