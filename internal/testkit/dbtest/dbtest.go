// Package dbtest hands each test a clean, migrated PostgreSQL database of its
// own on the cluster named by TEST_DATABASE_URL (make test starts one).
//
// The first caller migrates a template database, named for a hash of the
// migrations so that a changed migration makes a new one; each test then gets
// a copy (CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY), which takes
// milliseconds, and drops it at cleanup. Tests may therefore run in parallel without sharing rows.
//
// With FLOWD_TEST_CITUS=1 (make test-citus), TEST_DATABASE_URL is the
// coordinator of a Citus cluster whose nodes its pg_dist_node lists. A
// database there is one database of the same name on every node, so the
// template is made on every node (with the citus extension, the nodes
// registered, migrated and its tenant tables distributed as `flowd migrate
// --citus` does) and each test's copy too: a copy of the template on each
// node is the same distributed database, its shards and metadata included.
package dbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/migrations"
)

var counter atomic.Int64

// citusShards is how many shards the tenant tables of test databases have
// on Citus: enough for organizations to land on different shards and
// workers, few enough that a statement over every shard stays cheap.
const citusShards = 4

// Citus reports whether the tests run on a Citus cluster (FLOWD_TEST_CITUS=1).
func Citus() bool { return os.Getenv("FLOWD_TEST_CITUS") == "1" }

// AdminURL returns the URL of the test cluster's maintenance database (on
// Citus, the coordinator's).
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		t.Fatal("TEST_DATABASE_URL is not set: run the tests with `make test`, which starts a throwaway PostgreSQL")
	}
	return u
}

// NewURL creates a fresh migrated database and returns its URL; it is dropped at cleanup.
func NewURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, true)
}

// NewEmptyURL creates a fresh database with nothing migrated and returns
// its URL; it is dropped at cleanup. On Citus it has the citus extension
// and knows the cluster's nodes, as a database an operator prepared for
// flowd would. It is for tests of the migrations themselves.
func NewEmptyURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, false)
}

// New returns a pool on a fresh migrated database, closed and dropped at cleanup.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := NewURL(t)
	pool, err := database.Open(context.Background(), url, 10)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newDatabase(t testing.TB, migrated bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := clusterOf(t, ctx)
	tpl := c.emptyTemplate(t, ctx)
	if migrated {
		tpl = c.migratedTemplate(t, ctx, tpl)
	}
	name := fmt.Sprintf("t_%s_%d_%d", sanitize(t.Name()), os.Getpid(), counter.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.drop(ctx, name); err != nil {
			t.Logf("dbtest: drop %s: %v", name, err)
		}
	})
	if err := c.copy(ctx, tpl, name); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	return withDatabase(t, c.nodes[0], name)
}

// cluster is the test cluster: one server, or a Citus coordinator and its workers.
type cluster struct {
	nodes []string // each node's maintenance database, the coordinator's first
	hosts []string // each node's host:port as Citus knows it
}

func (c cluster) citus() bool { return len(c.hosts) > 0 }

func clusterOf(t testing.TB, ctx context.Context) cluster {
	t.Helper()
	admin := AdminURL(t)
	if !Citus() {
		return cluster{nodes: []string{admin}}
	}
	conn := connect(t, ctx, admin)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `select nodename, nodeport from pg_dist_node where noderole = 'primary' order by groupid`)
	if err != nil {
		t.Fatalf("dbtest: FLOWD_TEST_CITUS=1, but TEST_DATABASE_URL lists no Citus nodes: %v", err)
	}
	hosts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var host string
		var port int
		err := r.Scan(&host, &port)
		return net.JoinHostPort(host, strconv.Itoa(port)), err
	})
	if err != nil || len(hosts) < 2 {
		t.Fatalf("dbtest: Citus nodes %v: %v; want the coordinator and its workers", hosts, err)
	}
	c := cluster{hosts: hosts}
	for _, h := range hosts {
		u, err := url.Parse(admin)
		if err != nil {
			t.Fatalf("dbtest: TEST_DATABASE_URL: %v", err)
		}
		u.Host = h
		c.nodes = append(c.nodes, u.String())
	}
	return c
}

// each runs fn on every node's maintenance database at once.
func (c cluster) each(ctx context.Context, fn func(node int, conn *pgx.Conn) error) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, node := range c.nodes {
		wg.Go(func() {
			conn, err := pgx.Connect(ctx, node)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close(ctx)
			errs[i] = fn(i, conn)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// copy creates database name from template on every node.
func (c cluster) copy(ctx context.Context, template, name string) error {
	return c.each(ctx, func(_ int, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, fmt.Sprintf("create database %s template %s%s", ident(name), ident(template), fileCopy(conn)))
		return err
	})
}

// fileCopy is the clause that has PostgreSQL 15 and later copy a template's
// files instead of writing each of its pages to the WAL, their default: for
// a template of a few MiB, at the price of a checkpoint (cheap without
// fsync), it costs the server an eighth of the CPU, and the suite creates
// hundreds of databases.
func fileCopy(conn *pgx.Conn) string {
	major, _, _ := strings.Cut(conn.PgConn().ParameterStatus("server_version"), ".")
	if v, err := strconv.Atoi(major); err != nil || v < 15 {
		return ""
	}
	return " strategy file_copy"
}

// drop drops database name on every node.
func (c cluster) drop(ctx context.Context, name string) error {
	return c.each(ctx, func(_ int, conn *pgx.Conn) error {
		return c.execInUse(ctx, conn, fmt.Sprintf("drop database if exists %s with (force)", ident(name)))
	})
}

// execInUse runs sql, which needs a database nobody is connected to. On
// Citus a daemon connects to each database and takes a moment to leave
// when told to, which FORCE does not wait for: sql is tried again for a while.
func (c cluster) execInUse(ctx context.Context, conn *pgx.Conn, sql string) error {
	for try := 0; ; try++ {
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !c.citus() || try == 50 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// emptyTemplate returns the template of empty databases: template1 on one
// server; on Citus, one with the extension and the nodes registered.
func (c cluster) emptyTemplate(t testing.TB, ctx context.Context) string {
	t.Helper()
	if !c.citus() {
		return "template1"
	}
	return c.template(t, ctx, "flowd_tpl_citus_empty", func(building string) error {
		err := c.each(ctx, func(node int, conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, "create database "+ident(building)); err != nil {
				return err
			}
			db, err := pgx.Connect(ctx, withDatabase(t, c.nodes[node], building))
			if err != nil {
				return err
			}
			defer db.Close(ctx)
			_, err = db.Exec(ctx, "create extension citus")
			return err
		})
		if err != nil {
			return err
		}
		coordinator, err := pgx.Connect(ctx, withDatabase(t, c.nodes[0], building))
		if err != nil {
			return err
		}
		defer coordinator.Close(ctx)
		for i, h := range c.hosts {
			host, port, _ := net.SplitHostPort(h)
			register := "select citus_add_node($1, $2::int)"
			if i == 0 {
				register = "select citus_set_coordinator_host($1, $2::int)"
			}
			if _, err := coordinator.Exec(ctx, register, host, port); err != nil {
				return err
			}
		}
		return nil
	})
}

// migratedTemplate returns the template of migrated databases, made from
// empty: on Citus, with the tenant tables distributed.
func (c cluster) migratedTemplate(t testing.TB, ctx context.Context, empty string) string {
	t.Helper()
	name := "flowd_tpl_" + migrationsHash(t)
	if c.citus() {
		name += "_citus"
	}
	return c.template(t, ctx, name, func(building string) error {
		if err := c.copy(ctx, empty, building); err != nil {
			return err
		}
		u, err := url.Parse(withDatabase(t, c.nodes[0], building))
		if err != nil {
			return err
		}
		if c.citus() {
			q := u.Query()
			q.Set("citus.shard_count", strconv.Itoa(citusShards))
			u.RawQuery = q.Encode()
		}
		pool, err := database.Open(ctx, u.String(), 2)
		if err != nil {
			return err
		}
		defer pool.Close()
		if err := database.Migrate(ctx, pool); err != nil {
			return err
		}
		if !c.citus() {
			return nil
		}
		return database.Distribute(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	})
}

// template returns the template called name, which build makes under the
// name it is given when it does not exist yet.
func (c cluster) template(t testing.TB, ctx context.Context, name string, build func(building string) error) string {
	t.Helper()
	conn := connect(t, ctx, c.nodes[0])
	defer conn.Close(ctx)
	// Packages run as parallel processes: one builds the template, the rest wait.
	if _, err := conn.Exec(ctx, "select pg_advisory_lock(7230164002)"); err != nil {
		t.Fatalf("dbtest: lock: %v", err)
	}
	defer conn.Exec(ctx, "select pg_advisory_unlock(7230164002)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "select exists(select 1 from pg_database where datname = $1)", name).Scan(&exists); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	if exists {
		return name
	}
	// What a run that failed half way left goes first.
	building := name + "_building"
	for _, db := range []string{building, name} {
		if err := c.drop(ctx, db); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	if err := build(building); err != nil {
		t.Fatalf("dbtest: make template %s: %v", name, err)
	}
	// The coordinator's goes last: its name tells the others the template is whole.
	for i := len(c.nodes) - 1; i >= 0; i-- {
		if err := c.seal(ctx, c.nodes[i], building, name); err != nil {
			t.Fatalf("dbtest: template %s: %v", name, err)
		}
	}
	return name
}

// seal makes the database building on node the template name.
func (c cluster) seal(ctx context.Context, node, building, name string) error {
	conn, err := pgx.Connect(ctx, node)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if c.citus() {
		// Citus keeps a daemon connected to each database; a template is
		// copied only while nobody is connected to it.
		if _, err := conn.Exec(ctx, "alter database "+ident(building)+" allow_connections false"); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1", building); err != nil {
			return err
		}
	}
	return c.execInUse(ctx, conn, fmt.Sprintf("alter database %s rename to %s", ident(building), ident(name)))
}

func migrationsHash(t testing.TB) string {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	// What --citus distributes shapes the template too.
	h.Write([]byte(strings.Join(database.TenantTables, ",")))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func connect(t testing.TB, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	return conn
}

func withDatabase(t testing.TB, admin, name string) string {
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("dbtest: TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func sanitize(s string) string {
	s = strings.ToLower(s)
	b := make([]byte, 0, 24)
	for i := 0; i < len(s) && len(b) < 24; i++ {
		c := s[i]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b = append(b, c)
		} else if len(b) > 0 && b[len(b)-1] != '_' {
			b = append(b, '_')
		}
	}
	return string(b)
}
