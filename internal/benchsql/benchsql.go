// Package benchsql lets a store's tests check the pgbench scripts of
// cmd/flowbench against the store's own statements. The scripts are the
// benchmark's yardstick, PostgreSQL running what flowd runs; a statement
// of a script that differs from production's measures something else.
package benchsql

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Statements are the SQL statements of cmd/flowbench/sql/script, in order,
// without comments and pgbench's meta-commands (\set, \startpipeline, …),
// each without its closing semicolon.
func Statements(t testing.TB, script string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root(t), "cmd", "flowbench", "sql", script))
	if err != nil {
		t.Fatal(err)
	}
	var (
		out []string
		cur strings.Builder
	)
	for line := range strings.SplitSeq(string(src), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--") || strings.HasPrefix(trimmed, `\`)) {
			continue
		}
		cur.WriteString(line + "\n")
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	return out
}

// Check fails t unless statement i of the script is production's
// statement with each parameter $n written as args[n-1]: a pgbench
// variable (":org") or a value. White space does not count.
func Check(t testing.TB, script string, i int, production string, args ...string) {
	t.Helper()
	statements := Statements(t, script)
	want := Render(production, args...)
	if i >= len(statements) {
		t.Fatalf("%s has %d statements, want statement %d:\n%s", script, len(statements), i+1, want)
	}
	if got := statements[i]; collapse(got) != collapse(want) {
		t.Errorf("statement %d of cmd/flowbench/sql/%s is not production's; write it as\n%s;\nnot\n%s;", i+1, script, want, got)
	}
}

var parameter = regexp.MustCompile(`\$(\d+)`)

// Render writes args into statement's parameters.
func Render(statement string, args ...string) string {
	return parameter.ReplaceAllStringFunc(statement, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		if n < 1 || n > len(args) {
			return p
		}
		return args[n-1]
	})
}

var space = regexp.MustCompile(`\s+`)

func collapse(s string) string { return strings.TrimSpace(space.ReplaceAllString(s, " ")) }

// root is the repository's top directory: the one with go.mod, above the
// test's package.
func root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("benchsql: go.mod not found above the test's directory")
		}
		dir = parent
	}
}
