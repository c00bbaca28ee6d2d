// Package benchsql lets a store's tests check the pgbench scripts of
// cmd/flowbench against the store's own statements, and write them: the
// scripts are the benchmark's yardstick, PostgreSQL running what flowd
// runs, and a statement of a script that differs from production's
// measures something else. A test run with -update writes production's
// statements into the scripts.
package benchsql

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write production's statements into cmd/flowbench/sql")

// Statements are the SQL statements of cmd/flowbench/sql/script, in order,
// without comments and pgbench's meta-commands (\set, \startpipeline, …),
// each without its closing semicolon.
func Statements(t testing.TB, script string) []string {
	t.Helper()
	lines := read(t, script)
	var out []string
	for _, s := range spans(lines) {
		out = append(out, s.text(lines))
	}
	return out
}

// Check fails t unless statement i of the script is production's
// statement with each parameter $n written as args[n-1]: a pgbench
// variable (":org") or a value. White space does not count. With -update
// it writes the statement instead.
func Check(t testing.TB, script string, i int, production string, args ...string) {
	t.Helper()
	lines := read(t, script)
	statements := spans(lines)
	want := Render(production, args...)
	if i >= len(statements) {
		t.Fatalf("%s has %d statements, want statement %d:\n%s", script, len(statements), i+1, want)
	}
	s := statements[i]
	got := statements[i].text(lines)
	if collapse(got) == collapse(want) {
		return
	}
	if !*update {
		t.Errorf("statement %d of cmd/flowbench/sql/%s is not production's (go test -update writes it); want\n%s;\nnot\n%s;",
			i+1, script, want, got)
		return
	}
	written := slices.Concat(lines[:s.from], wrap(want+";"), lines[s.to:])
	if err := os.WriteFile(path(t, script), []byte(strings.Join(written, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func path(t testing.TB, script string) string {
	return filepath.Join(root(t), "cmd", "flowbench", "sql", script)
}

func read(t testing.TB, script string) []string {
	t.Helper()
	src, err := os.ReadFile(path(t, script))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(src), "\n")
}

// span is a statement's lines, from up to to.
type span struct{ from, to int }

// spans finds the statements of a script's lines: outside a statement,
// blank lines, comments and meta-commands are skipped; a statement ends
// with the line that ends with a semicolon, or with \gset, which stores
// its row in variables instead.
func spans(lines []string) []span {
	var out []span
	from := -1
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if from < 0 {
			if trimmed == "" || strings.HasPrefix(trimmed, "--") || strings.HasPrefix(trimmed, `\`) {
				continue
			}
			from = i
		}
		if strings.HasSuffix(trimmed, ";") || gset.MatchString(trimmed) {
			out = append(out, span{from, i + 1})
			from = -1
		}
	}
	return out
}

// gset is a statement's closing \gset and the prefix of the variables it
// sets.
var gset = regexp.MustCompile(`\s*\\gset(\s+(\w+))?$`)

// text is a span's statement without its closing semicolon or \gset.
func (s span) text(lines []string) string {
	text := strings.TrimSpace(strings.Join(lines[s.from:s.to], "\n"))
	return strings.TrimSuffix(gset.ReplaceAllString(text, ""), ";")
}

// Prepared is a statement as pgbench prepares it (-M prepared): each of
// its variables a parameter of its own, $1 first, and their values.
type Prepared struct {
	SQL  string
	Args []string
}

// Run is what pgbench runs of script in one transaction of its, with
// vars defined (-D): the statements of the branches of \if :var … \else
// … \endif that vars choose, each as pgbench prepares it. A variable that
// \set computes is 1 unless vars defines it; one a \gset stores must be
// in vars.
func Run(t testing.TB, script string, vars map[string]string) []Prepared {
	t.Helper()
	lines := read(t, script)
	vars = maps.Clone(vars)
	var out []Prepared
	// taken says, for each \if block around the line, whether its branch
	// is the one pgbench runs.
	var taken []bool
	skipping := func() bool { return slices.Contains(taken, false) }
	statements := spans(lines)
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch fields := strings.Fields(line); {
		case len(fields) == 0 || strings.HasPrefix(line, "--"):
		case fields[0] == `\if`:
			if len(fields) != 2 || !strings.HasPrefix(fields[1], ":") {
				t.Fatalf("%s: benchsql reads only \\if :variable, not %q", script, line)
			}
			v, ok := vars[fields[1][1:]]
			if !ok {
				t.Fatalf("%s: %s is not defined", script, fields[1])
			}
			taken = append(taken, v != "0" && v != "false" && v != "")
		case fields[0] == `\else`:
			taken[len(taken)-1] = !taken[len(taken)-1]
		case fields[0] == `\endif`:
			taken = taken[:len(taken)-1]
		case fields[0] == `\set`:
			if _, ok := vars[fields[1]]; !ok {
				vars[fields[1]] = "1"
			}
		case strings.HasPrefix(line, `\`):
		default:
			s := statements[0]
			if s.from != i {
				t.Fatalf("%s: line %d is not where statement %q starts", script, i+1, s.text(lines))
			}
			statements, i = statements[1:], s.to-1
			if !skipping() {
				out = append(out, prepare(t, script, s.text(lines), vars))
			}
		}
	}
	return out
}

// variable is pgbench's :name, which starts with a letter or underscore;
// "::" is a cast.
var variable = regexp.MustCompile(`::|:[A-Za-z_][A-Za-z0-9_]*`)

// prepare numbers the variables of statement as pgbench does, each
// occurrence a parameter of its own.
func prepare(t testing.TB, script, statement string, vars map[string]string) Prepared {
	t.Helper()
	var p Prepared
	p.SQL = variable.ReplaceAllStringFunc(statement, func(v string) string {
		if v == "::" {
			return v
		}
		value, ok := vars[v[1:]]
		if !ok {
			t.Fatalf("%s: %s is not defined in\n%s", script, v, statement)
		}
		p.Args = append(p.Args, value)
		return "$" + strconv.Itoa(len(p.Args))
	})
	return p
}

// wrap lays a statement out for reading: a line for each clause outside
// parentheses, and lines longer than 110 characters broken after a comma;
// the lines after its first are indented by a tab.
func wrap(statement string) []string {
	var out []string
	for _, line := range clauses(collapse(statement)) {
		for len(line) > 110 {
			cut := strings.LastIndex(line[:110], ", ")
			if cut < 0 {
				break
			}
			out = append(out, line[:cut+1])
			line = line[cut+2:]
		}
		out = append(out, line)
	}
	for i := 1; i < len(out); i++ {
		out[i] = "\t" + out[i]
	}
	return out
}

var clauseWords = []string{" insert into ", " select ", " from ", " where ", " order by ", " values ", " returning "}

// clauses splits a statement before each of clauseWords that stands
// outside parentheses and quotes.
func clauses(s string) []string {
	var out []string
	depth, quoted, from := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ' ' && depth == 0:
			for _, w := range clauseWords {
				if strings.HasPrefix(s[i:], w) {
					out = append(out, s[from:i])
					from = i + 1
					break
				}
			}
		}
	}
	return append(out, s[from:])
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
