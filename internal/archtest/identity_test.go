package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// identityShared are the packages under modules/identity that are no part:
// the helpers every part may use (internal), the change feed that keeps
// the parts' caches current (changes) and the tests' kit that builds the
// parts (identitytest).
var identityShared = []string{"internal", "changes", "identitytest"}

// identityParts lists the parts of the identity module: the folders under
// modules/identity but the shared ones.
func identityParts(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root(t), "modules", "identity"))
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, e := range entries {
		if e.IsDir() && !slices.Contains(identityShared, e.Name()) {
			parts = append(parts, e.Name())
		}
	}
	if len(parts) < 6 {
		t.Fatalf("found only the parts %v under modules/identity", parts)
	}
	return parts
}

// TestIdentityPartsOpenWithTheirDomain: each part of the identity module,
// as each module does, opens with its domain in <part>/<part>.go, free of
// pgx, echo and templ.
func TestIdentityPartsOpenWithTheirDomain(t *testing.T) {
	for _, part := range identityParts(t) {
		file := filepath.Join(root(t), "modules", "identity", part, part+".go")
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("identity's part %s has no domain file %s.go: %v", part, part, err)
			continue
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range []string{"github.com/jackc/pgx", "github.com/labstack/echo", "github.com/a-h/templ"} {
				if strings.HasPrefix(p, bad) {
					t.Errorf("%s imports %s", file, p)
				}
			}
		}
	}
}

// TestIdentityPartsUseEachOtherOnlyThroughTheirDomain: a part of the
// identity module imports another part's domain package, never what lies
// below it.
func TestIdentityPartsUseEachOtherOnlyThroughTheirDomain(t *testing.T) {
	base := filepath.Join(root(t), "modules", "identity")
	for file, imps := range imports(t, base) {
		rel, _ := filepath.Rel(base, file)
		own := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
		for _, imp := range imps {
			rest, ok := strings.CutPrefix(imp, module+"modules/identity/")
			if !ok {
				continue
			}
			parts := strings.Split(rest, "/")
			if parts[0] != own && !slices.Contains(identityShared, parts[0]) && len(parts) > 1 {
				t.Errorf("%s imports %s, below the domain of identity's part %s", file, imp, parts[0])
			}
		}
	}
}

// identityTables are the tables of the identity module, by the part that
// owns them: no other part's code names them, and the owner's only in its
// private storage.
var identityTables = map[string]string{
	"organizations": "orgs", "api_clients": "orgs", "external_clients": "orgs", "api_rate_windows": "orgs",
	"refresh_tokens": "tokens", "revoked_access_tokens": "tokens", "client_assertion_jtis": "tokens", "dpop_proofs": "tokens",
	"signing_keys":   "keys",
	"audit_log":      "audit",
	"staff_accounts": "staff", "login_attempts": "staff", "login_sessions": "staff",
	"login_requests": "login", "login_codes": "login", "login_access_tokens": "login",
}

var (
	createTable = regexp.MustCompile(`(?i)create\s+(?:unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?([a-z_][a-z0-9_]*)`)
	sqlWords    = regexp.MustCompile(`(?i)\b(select|insert\s+into|update|delete\s+from)\b`)
	word        = regexp.MustCompile(`[a-z_][a-z0-9_]*`)
)

// TestIdentityTablesBelongToOnePart: the SQL of the identity module names a
// table only in the private storage (internal/) of the part that owns it,
// and no table of another module; every table of identity's is used by its
// owner.
func TestIdentityTablesBelongToOnePart(t *testing.T) {
	migrations, err := filepath.Glob(filepath.Join(root(t), "migrations", "*.sql"))
	if err != nil || len(migrations) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	tables := map[string]bool{}
	for _, m := range migrations {
		raw, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range createTable.FindAllStringSubmatch(string(raw), -1) {
			tables[strings.ToLower(c[1])] = true
		}
	}
	for table := range identityTables {
		if !tables[table] {
			t.Errorf("identityTables names %s, which no migration creates", table)
		}
	}
	base := filepath.Join(root(t), "modules", "identity")
	used := map[string]bool{}
	err = filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, path)
		rel = filepath.ToSlash(rel)
		part := strings.SplitN(rel, "/", 2)[0]
		private := strings.HasPrefix(rel, part+"/internal/")
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			sql, err := strconv.Unquote(lit.Value)
			if err != nil || !sqlWords.MatchString(sql) {
				return true
			}
			for _, w := range word.FindAllString(strings.ToLower(sql), -1) {
				if !tables[w] {
					continue
				}
				owner, ours := identityTables[w]
				switch {
				case !ours:
					t.Errorf("%s names %s, a table of another module", rel, w)
				case owner != part:
					t.Errorf("%s names %s, a table of identity's part %s", rel, w, owner)
				case !private:
					t.Errorf("%s names %s outside its part's internal storage", rel, w)
				default:
					used[w] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for table, owner := range identityTables {
		if !used[table] {
			t.Errorf("no SQL of %s/internal names its table %s: is the map of tables current?", owner, table)
		}
	}
}
