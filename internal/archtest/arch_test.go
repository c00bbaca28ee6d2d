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

// TestModulesStayBelowTheWebLayer: modules never import the server, the
// views or the wiring; the web layer depends on them, not the reverse.
func TestModulesStayBelowTheWebLayer(t *testing.T) {
	forbidden := []string{module + "web", module + "views", module + "internal/app"}
	files := imports(t, filepath.Join(root(t), "modules"))
	if len(files) == 0 {
		t.Fatal("no module files found")
	}
	for file, imps := range files {
		for _, imp := range imps {
			for _, f := range forbidden {
				if imp == f || strings.HasPrefix(imp, f+"/") {
					t.Errorf("%s imports %s", file, imp)
				}
			}
		}
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
// module's domain package, never its implementation subpackages. Beside its
// domain package a module may offer domain words that keep no state and no
// storage, listed here: flows' national id formats and normalisation.
func TestModulesUseEachOtherOnlyThroughTheirDomain(t *testing.T) {
	offered := map[string]bool{"flows/nationalid": true}
	for file, imps := range imports(t, filepath.Join(root(t), "modules")) {
		rel, _ := filepath.Rel(filepath.Join(root(t), "modules"), file)
		own := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
		for _, imp := range imps {
			rest, ok := strings.CutPrefix(imp, module+"modules/")
			if !ok {
				continue
			}
			parts := strings.Split(rest, "/")
			if parts[0] != own && len(parts) > 1 && !offered[rest] {
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

// TestCommandFrameworkKnowsNoCommand: internal/app/command reads command
// lines and prints usage for any table of commands; it imports nothing of
// flowd's, so that the commands (internal/app, internal/app/admin) depend on
// it and never the reverse.
func TestCommandFrameworkKnowsNoCommand(t *testing.T) {
	files := imports(t, filepath.Join(root(t), "internal", "app", "command"))
	if len(files) == 0 {
		t.Fatal("no files found in internal/app/command")
	}
	for file, imps := range files {
		for _, imp := range imps {
			if strings.HasPrefix(imp, module) {
				t.Errorf("%s imports %s: the command framework knows no command", file, imp)
			}
		}
	}
}
