// Package archtest holds the import rules of flowd's layout, checked on every
// test run so that the boundaries cannot erode quietly.
package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/flowd/flowd/"

// imports maps each non-test Go file under dir to its imports.
func imports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[path] = append(out[path], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root not found from %s", dir)
	}
	return dir
}

// layers ranks the top folders of the tree: a package may import its own
// layer's and lower ones', never a higher one's. The composition root
// (cmd/) wires the surfaces (web/), which render views/ and call the
// modules/, which stand on the shared packages of internal/; migrations and
// assets are data that any layer may embed.
var layers = map[string]int{"cmd": 5, "web": 4, "views": 3, "modules": 2, "internal": 1, "migrations": 0, "assets": 0}

// TestImportsPointDown: every import of flowd's own code points down the
// layers, so that a reader can start at cmd/flowd and read down, and the
// shared packages of internal/ know no module, no surface and no wiring.
// Tests may import up: a module's test may start the whole of flowd.
func TestImportsPointDown(t *testing.T) {
	checked := 0
	for dir := range layers {
		for file, imps := range imports(t, filepath.Join(root(t), dir)) {
			checked++
			for _, imp := range imps {
				rest, ok := strings.CutPrefix(imp, module)
				if !ok {
					continue
				}
				to := strings.SplitN(rest, "/", 2)[0]
				rank, known := layers[to]
				switch {
				case !known:
					t.Errorf("%s imports %s, of a folder no layer names: add it to layers", file, imp)
				case rank > layers[dir]:
					t.Errorf("%s imports %s: %s/ stands above %s/, and imports point down", file, imp, to, dir)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("found only %d files in the layers", checked)
	}
}

// TestDomainFilesImportNoInfrastructure: modules/<m>/<m>.go holds the
// domain and its interfaces, free of pgx, echo and templ.
func TestDomainFilesImportNoInfrastructure(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(root(t), "modules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		file := filepath.Join(root(t), "modules", e.Name(), e.Name()+".go")
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("module %s has no domain file %s.go: %v", e.Name(), e.Name(), err)
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

// TestModulesUseEachOtherOnlyThroughTheirDomain: a module may import another
// module's domain package, never its implementation subpackages.
func TestModulesUseEachOtherOnlyThroughTheirDomain(t *testing.T) {
	for file, imps := range imports(t, filepath.Join(root(t), "modules")) {
		rel, _ := filepath.Rel(filepath.Join(root(t), "modules"), file)
		own := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
		for _, imp := range imps {
			rest, ok := strings.CutPrefix(imp, module+"modules/")
			if !ok {
				continue
			}
			parts := strings.Split(rest, "/")
			if parts[0] != own && len(parts) > 1 {
				t.Errorf("%s imports %s, an implementation package of module %s", file, imp, parts[0])
			}
		}
	}
}

// TestWebSurfacesStayApart: each package directly under web/ is a surface
// (the API, the provider, the console, the person's pages) and imports
// neither another surface nor web itself; what surfaces share lives in
// web/internal/, and web/openapi is the API's document, not a surface.
func TestWebSurfacesStayApart(t *testing.T) {
	webDir := filepath.Join(root(t), "web")
	entries, err := os.ReadDir(webDir)
	if err != nil {
		t.Fatal(err)
	}
	surfaces := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "internal" && e.Name() != "openapi" {
			surfaces[e.Name()] = true
		}
	}
	if len(surfaces) < 4 {
		t.Fatalf("found only the surfaces %v under web/", surfaces)
	}
	for name := range surfaces {
		for file, imps := range imports(t, filepath.Join(webDir, name)) {
			for _, imp := range imps {
				rest, ok := strings.CutPrefix(imp, module+"web")
				if !ok {
					continue
				}
				other := strings.SplitN(strings.TrimPrefix(rest, "/"), "/", 2)[0]
				if rest == "" || (surfaces[other] && other != name) {
					t.Errorf("%s imports %s: surfaces share only web/internal/", file, imp)
				}
			}
		}
	}
}

// TestCommandFrameworkKnowsNoCommand: cmd/flowd/internal/command reads
// command lines and prints usage for any table of commands; it imports
// nothing of flowd's, so that the commands (cmd/flowd/internal/app and
// admin) depend on it and never the reverse.
func TestCommandFrameworkKnowsNoCommand(t *testing.T) {
	files := imports(t, filepath.Join(root(t), "cmd", "flowd", "internal", "command"))
	if len(files) == 0 {
		t.Fatal("no files found in cmd/flowd/internal/command")
	}
	for file, imps := range files {
		for _, imp := range imps {
			if strings.HasPrefix(imp, module) {
				t.Errorf("%s imports %s: the command framework knows no command", file, imp)
			}
		}
	}
}
