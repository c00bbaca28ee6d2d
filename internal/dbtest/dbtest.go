// Package dbtest hands each test a clean, migrated PostgreSQL database of its
// own on the cluster named by TEST_DATABASE_URL (make test starts one).
//
// The first caller migrates a template database, named for a hash of the
// migrations so that a changed migration makes a new one; each test then gets
// a copy (CREATE DATABASE … TEMPLATE), which takes milliseconds, and drops it
// at cleanup. Tests may therefore run in parallel without sharing rows.
package dbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/migrations"
)

var counter atomic.Int64

// AdminURL returns the URL of the test cluster's maintenance database.
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := AdminURL(t)
	tpl := ensureTemplate(t, ctx, admin)
	name := fmt.Sprintf("t_%s_%d_%d", sanitize(t.Name()), os.Getpid(), counter.Add(1))
	conn := connect(t, ctx, admin)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("create database %s template %s", pgx.Identifier{name}.Sanitize(), pgx.Identifier{tpl}.Sanitize())); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("dbtest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, fmt.Sprintf("drop database if exists %s with (force)", pgx.Identifier{name}.Sanitize())); err != nil {
			t.Logf("dbtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(t, admin, name)
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

func ensureTemplate(t testing.TB, ctx context.Context, admin string) string {
	t.Helper()
	name := "flowd_tpl_" + migrationsHash(t)
	conn := connect(t, ctx, admin)
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
	building := name + "_building"
	ident := pgx.Identifier{building}.Sanitize()
	if _, err := conn.Exec(ctx, "drop database if exists "+ident); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	if _, err := conn.Exec(ctx, "create database "+ident); err != nil {
		t.Fatalf("dbtest: create template: %v", err)
	}
	pool, err := database.Open(ctx, withDatabase(t, admin, building), 2)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	err = database.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		t.Fatalf("dbtest: migrate template: %v", err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("alter database %s rename to %s", ident, pgx.Identifier{name}.Sanitize())); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return name
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
