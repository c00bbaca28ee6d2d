package main

import (
	"os"
	"strings"
	"testing"
)

// TestDefaultOutIsIgnored: every run writes a JSON file, and only the one
// docs/performance.md shows is committed, so git must ignore the default
// -out folder.
func TestDefaultOutIsIgnored(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Trim(strings.TrimSpace(line), "/") == defaultOut {
			return
		}
	}
	t.Fatalf(".gitignore does not list %s/, flowbench's default -out", defaultOut)
}
