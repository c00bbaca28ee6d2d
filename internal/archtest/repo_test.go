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
