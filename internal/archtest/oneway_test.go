package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// pkgFiles parses the non-test Go files of the one package in dir.
func pkgFiles(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// typeSpecs maps the names of the types files declare to their definitions.
func typeSpecs(files []*ast.File) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					ts := s.(*ast.TypeSpec)
					out[ts.Name.Name] = ts.Type
				}
			}
		}
	}
	return out
}

// TestDecisionsFlowOneWay: a decision and a withdrawal go consent → flows →
// webhooks, and nothing calls back against that direction. Consent decides
// and signs and hands flows what to record; flows records it and publishes
// through webhooks. So:
//   - flows never imports consent, and webhooks neither of them;
//   - what consent needs of flows (consent.Flows) takes no callback: no
//     function, and no interface flows declares for another module to
//     implement (a function flows returns is its answer, which consent
//     reads once the batch it queued a read on is sent);
//   - the flows methods consent calls, and everything in flows they call,
//     use no collaborator flows declares but Events (webhooks): not the
//     consent links, definitions or organizations it uses elsewhere, nor a
//     signer of receipts.
func TestDecisionsFlowOneWay(t *testing.T) {
	modules := filepath.Join(root(t), "modules")
	for file, imps := range imports(t, modules) {
		rel := filepath.ToSlash(strings.TrimPrefix(file, modules+string(filepath.Separator)))
		for _, imp := range imps {
			switch {
			case strings.HasPrefix(rel, "flows/") && strings.HasPrefix(imp, module+"modules/consent"),
				strings.HasPrefix(rel, "webhooks/") && (strings.HasPrefix(imp, module+"modules/consent") || strings.HasPrefix(imp, module+"modules/flows")):
				t.Errorf("%s imports %s: decisions flow consent → flows → webhooks, not back", file, imp)
			}
		}
	}

	flowsFiles := pkgFiles(t, filepath.Join(modules, "flows"))
	flowsTypes := typeSpecs(flowsFiles)
	declaredInterface := func(name string) bool {
		_, ok := flowsTypes[name].(*ast.InterfaceType)
		return ok
	}

	// What consent needs of flows, and that it takes no callback.
	consentFlows, ok := typeSpecs(pkgFiles(t, filepath.Join(modules, "consent")))["Flows"].(*ast.InterfaceType)
	if !ok {
		t.Fatal("modules/consent declares no interface Flows: what consent needs of flows")
	}
	var entries []string
	for _, m := range consentFlows.Methods.List {
		fn, ok := m.Type.(*ast.FuncType)
		if !ok || len(m.Names) != 1 {
			t.Fatalf("consent.Flows embeds %v: list its methods, so that this rule sees them", m.Type)
		}
		name := m.Names[0].Name
		entries = append(entries, name)
		params := len(fn.Params.List)
		fields := fn.Params.List
		if fn.Results != nil {
			fields = append(fields, fn.Results.List...)
		}
		for i, p := range fields {
			switch typ := p.Type.(type) {
			case *ast.FuncType:
				if i < params {
					t.Errorf("consent.Flows.%s takes a function: a callback from flows into consent", name)
				}
			case *ast.SelectorExpr:
				if x, ok := typ.X.(*ast.Ident); ok && x.Name == "flows" {
					if _, fn := flowsTypes[typ.Sel.Name].(*ast.FuncType); fn || declaredInterface(typ.Sel.Name) {
						t.Errorf("consent.Flows.%s takes flows.%s, which consent would implement: a callback from flows into consent", name, typ.Sel.Name)
					}
				}
			}
		}
	}

	// flows.Manager's fields that hold what flows declares of other modules.
	manager, ok := flowsTypes["Manager"].(*ast.StructType)
	if !ok {
		t.Fatal("modules/flows declares no struct Manager: the flows module")
	}
	collaborators := map[string]string{} // field → interface
	for _, f := range manager.Fields.List {
		if id, ok := f.Type.(*ast.Ident); ok && declaredInterface(id.Name) {
			for _, n := range f.Names {
				collaborators[n.Name] = id.Name
			}
		}
	}
	if len(collaborators) < 2 {
		t.Fatalf("flows.Manager holds %v of the interfaces flows declares: this rule no longer sees them", collaborators)
	}

	// Walk from the entries through flows' own methods and functions.
	methods, funcs := map[string]*ast.FuncDecl{}, map[string]*ast.FuncDecl{}
	for _, f := range flowsFiles {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if fd.Recv == nil {
				funcs[fd.Name.Name] = fd
			} else if isManager(fd.Recv.List[0].Type) {
				methods[fd.Name.Name] = fd
			}
		}
	}
	reached := map[string]string{} // method or function → the entry it was reached from
	var queue []*ast.FuncDecl
	for _, e := range entries {
		fd, ok := methods[e]
		if !ok {
			t.Fatalf("consent.Flows names %s, which flows.Manager does not have", e)
		}
		reached["Manager."+e] = e
		queue = append(queue, fd)
	}
	var used []string
	for len(queue) > 0 {
		fd := queue[0]
		queue = queue[1:]
		from := reached[funcKey(fd)]
		managers := managerNames(fd)
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				x, ok := n.X.(*ast.Ident)
				if !ok || !managers[x.Name] {
					return true
				}
				if iface, ok := collaborators[n.Sel.Name]; ok && iface != "Events" {
					used = append(used, from+" reaches "+funcKey(fd)+", which uses "+x.Name+"."+n.Sel.Name+" ("+iface+")")
				}
				if m, ok := methods[n.Sel.Name]; ok {
					if _, seen := reached["Manager."+n.Sel.Name]; !seen {
						reached["Manager."+n.Sel.Name] = from
						queue = append(queue, m)
					}
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok {
					if f, ok := funcs[id.Name]; ok {
						if _, seen := reached[id.Name]; !seen {
							reached[id.Name] = from
							queue = append(queue, f)
						}
					}
				}
			}
			return true
		})
	}
	sort.Strings(used)
	for _, u := range used {
		t.Errorf("flows.Manager.%s: on a decision's path flows calls out only to Events (webhooks)", u)
	}
}

// isManager reports whether typ is Manager or *Manager.
func isManager(typ ast.Expr) bool {
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.Name == "Manager"
}

// managerNames are the names fd gives a Manager: its receiver and parameters.
func managerNames(fd *ast.FuncDecl) map[string]bool {
	out := map[string]bool{}
	var fields []*ast.Field
	if fd.Recv != nil {
		fields = append(fields, fd.Recv.List...)
	}
	fields = append(fields, fd.Type.Params.List...)
	for _, f := range fields {
		if isManager(f.Type) {
			for _, n := range f.Names {
				out[n.Name] = true
			}
		}
	}
	return out
}

// funcKey names fd as reached holds it.
func funcKey(fd *ast.FuncDecl) string {
	if fd.Recv != nil {
		return "Manager." + fd.Name.Name
	}
	return fd.Name.Name
}
