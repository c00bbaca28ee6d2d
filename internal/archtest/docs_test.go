package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// settingName matches the name of a setting flowd reads from the environment.
var settingName = regexp.MustCompile(`\b(?:DATABASE_URL|FLOWD_[A-Z0-9_]*[A-Z0-9])\b`)

// TestEverySettingIsDocumented: docs/configuration.md is the one list of
// settings, so every setting internal/config reads is there, by its full
// name, and every setting it or the README names is one flowd reads.
func TestEverySettingIsDocumented(t *testing.T) {
	read := func(rel string) []string {
		raw, err := os.ReadFile(filepath.Join(root(t), rel))
		if err != nil {
			t.Fatal(err)
		}
		names := settingName.FindAllString(string(raw), -1)
		slices.Sort(names)
		return slices.Compact(names)
	}
	config, documented := read("internal/config/config.go"), read("docs/configuration.md")
	if len(config) < 10 {
		t.Fatalf("found only %v in internal/config/config.go", config)
	}
	for _, name := range config {
		if !slices.Contains(documented, name) {
			t.Errorf("docs/configuration.md does not document %s, which internal/config reads", name)
		}
	}
	for _, doc := range []string{"docs/configuration.md", "README.md"} {
		for _, name := range read(doc) {
			if !slices.Contains(config, name) {
				t.Errorf("%s names %s, which internal/config does not read", doc, name)
			}
		}
	}
}
