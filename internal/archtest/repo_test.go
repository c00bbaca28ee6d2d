package archtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerBuildLeavesSecretsOut: `docker build` sends the whole folder to
// the daemon and the Dockerfile copies it, so the history and `make run`'s
// .data (its cluster and secrets.env) must be listed in .dockerignore.
func TestDockerBuildLeavesSecretsOut(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root(t), ".dockerignore"))
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	ignored := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			ignored[strings.Trim(line, "/")] = true
		}
	}
	for _, must := range []string{".git", ".data"} {
		if !ignored[must] {
			t.Errorf(".dockerignore does not list %s", must)
		}
	}
}

// TestGoModRequiresEachModuleOnce: a module required twice (as merges of
// go.mod leave it) builds, but `go mod tidy` rewrites the file, so tooling
// that checks tidiness fails and the versions may disagree. `make lint`
// runs `go mod tidy -diff` in full; this catches the duplicate without the
// network that needs.
func TestGoModRequiresEachModuleOnce(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	inBlock := false
	for i, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0 || strings.HasPrefix(fields[0], "//"):
			continue
		case fields[0] == "require" && len(fields) > 1 && fields[1] == "(":
			inBlock = true
			continue
		case inBlock && fields[0] == ")":
			inBlock = false
			continue
		case fields[0] == "require" && len(fields) >= 3:
			fields = fields[1:]
		case !inBlock:
			continue
		}
		if first, ok := seen[fields[0]]; ok {
			t.Errorf("go.mod:%d requires %s again (first on line %d)", i+1, fields[0], first)
		}
		seen[fields[0]] = i + 1
	}
	if len(seen) == 0 {
		t.Fatal("no requirements read from go.mod")
	}
}
