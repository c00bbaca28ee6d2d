package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// mdLink matches a Markdown link's target.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// mdHeading matches a heading's text.
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	// mdFence matches a fenced block, whose lines are no headings or code spans.
	mdFence = regexp.MustCompile("(?s)```.*?```")
	// codeSpan matches an inline code span.
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
)

// TestDocsLinksResolve: every relative link of the README and docs/ names
// a file that exists and, in a Markdown file, a heading it has, so that a
// page split or a heading renamed cannot leave a reader at a dead end.
func TestDocsLinksResolve(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root(t), "docs", "*.md"))
	if err != nil || len(docs) < 5 {
		t.Fatalf("found only %v in docs/: %v", docs, err)
	}
	for _, doc := range append(docs, filepath.Join(root(t), "README.md")) {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root(t), doc)
		for _, m := range mdLink.FindAllStringSubmatch(mdFence.ReplaceAllString(string(raw), ""), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := doc
			if path != "" {
				target = filepath.Join(filepath.Dir(doc), path)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links %s, which does not exist", rel, link)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !headingAnchors(t, target)[anchor] {
				t.Errorf("%s links %s, whose page has no heading #%s", rel, link, anchor)
			}
		}
	}
}

// headingAnchors are the anchors GitHub gives the headings of a Markdown file.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(mdFence.ReplaceAllString(string(raw), ""), -1) {
		out[anchorOf(m[1])] = true
	}
	return out
}

func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && !strings.ContainsRune("—–…’“”·→", r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// goSymbols is what the Go files of the tree declare: package names with
// their top-level names, types with their methods and fields, and every
// name declared anywhere, tests' functions included.
type goSymbols struct {
	pkgs    map[string]map[string]bool // package name → top-level names
	members map[string]map[string]bool // type name → methods and fields
	any     map[string]bool
}

func loadSymbols(t *testing.T) goSymbols {
	t.Helper()
	s := goSymbols{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, any: map[string]bool{}}
	add := func(m map[string]map[string]bool, k, v string) {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		m[k][v] = true
	}
	err := filepath.WalkDir(root(t), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := strings.TrimSuffix(f.Name.Name, "_test")
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				s.any[d.Name.Name] = true
				if d.Recv == nil {
					add(s.pkgs, pkg, d.Name.Name)
					continue
				}
				typ := d.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if idx, ok := typ.(*ast.IndexExpr); ok {
					typ = idx.X
				}
				if idx, ok := typ.(*ast.IndexListExpr); ok {
					typ = idx.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					add(s.members, id.Name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						s.any[spec.Name.Name] = true
						add(s.pkgs, pkg, spec.Name.Name)
						if st, ok := spec.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								for _, n := range fld.Names {
									add(s.members, spec.Name.Name, n.Name)
									s.any[n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							s.any[n.Name] = true
							add(s.pkgs, pkg, n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	// qualified is pkg.Name or pkg.Type.Member, or Type.Member.
	qualified = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?$`)
	// camel is a bare Go name a reader would look up: mixed case, or a test.
	camel = regexp.MustCompile(`^(?:[a-z]+[A-Z][A-Za-z0-9]*|Test[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)$`)
	// treePath is a path of the repository.
	treePath = regexp.MustCompile(`^(?:cmd|internal|modules|web|views|migrations|scripts|deploy|docs|assets)/[A-Za-z0-9_./-]*$`)
)

// TestTheArchitectureNamesWhatExists: every Go name and path that
// docs/architecture.md puts in code (`flows.Flow`, `envelopeOf`,
// `web/api/flows.go`) exists, so that its recipes do not send a reader to
// a function that moved.
func TestTheArchitectureNamesWhatExists(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root(t), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	syms := loadSymbols(t)
	apiNames := apiMembers(t)
	checked := 0
	for _, m := range codeSpan.FindAllStringSubmatch(mdFence.ReplaceAllString(string(raw), ""), -1) {
		span := strings.TrimSpace(m[1])
		if i := strings.IndexAny(span, "( "); i > 0 {
			span = span[:i]
		}
		switch {
		case treePath.MatchString(span):
			if strings.ContainsAny(span, "<>*…") || strings.Contains(span, "NN") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(root(t), strings.TrimSuffix(span, "/"))); err != nil {
				t.Errorf("docs/architecture.md names %s, which does not exist", span)
			}
		case qualified.MatchString(span):
			q := qualified.FindStringSubmatch(span)
			if strings.Contains(q[2], "_") || fileExt[q[2]] { // a table's column or a file's name, not Go
				continue
			}
			if names, ok := syms.pkgs[q[1]]; ok { // pkg.Name[.Member]
				checked++
				if !names[q[2]] || (q[3] != "" && !syms.members[q[2]][q[3]]) {
					t.Errorf("docs/architecture.md names %s, which package %s does not declare", span, q[1])
				}
			} else if members, ok := syms.members[q[1]]; ok && q[3] == "" && ast.IsExported(q[1]) { // Type.Member
				checked++
				if !members[q[2]] {
					t.Errorf("docs/architecture.md names %s, which type %s does not have", span, q[1])
				}
			}
		case camel.MatchString(span) && !apiNames[span] && !notFlowd[span]:
			checked++
			if !syms.any[span] {
				t.Errorf("docs/architecture.md names %s, which no Go file declares", span)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d names of docs/architecture.md", checked)
	}
}

// apiMembers are the names of the API's JSON members (flowId, hasErrors),
// which the docs name in code too: the OpenAPI document's keys.
func apiMembers(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root(t), "web", "openapi", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range yamlKey.FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = true
	}
	return out
}

var (
	yamlKey = regexp.MustCompile(`(?m)^\s*([A-Za-z][A-Za-z0-9_]*):`)
	fileExt = map[string]bool{"go": true, "yaml": true, "yml": true, "sql": true, "templ": true, "md": true, "json": true, "sh": true}
)

// notFlowd are names the architecture gives in code that are not flowd's
// Go: its libraries' options and the web's own words.
var notFlowd = map[string]bool{"JobListHideArgsByDefault": true, "SameSite": true, "HttpOnly": true}
