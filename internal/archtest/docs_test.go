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

// TestEverySettingIsInTheReadme: the README's configuration tables are the
// one list of settings, so every setting internal/config reads is there, by
// its full name, and every setting the README names is one flowd reads.
func TestEverySettingIsInTheReadme(t *testing.T) {
	read := func(rel string) []string {
		raw, err := os.ReadFile(filepath.Join(root(t), rel))
		if err != nil {
			t.Fatal(err)
		}
		names := settingName.FindAllString(string(raw), -1)
		slices.Sort(names)
		return slices.Compact(names)
	}
	config, readme := read("internal/config/config.go"), read("README.md")
	if len(config) < 10 {
		t.Fatalf("found only %v in internal/config/config.go", config)
	}
	for _, name := range config {
		if !slices.Contains(readme, name) {
			t.Errorf("README.md does not document %s, which internal/config reads", name)
		}
	}
	for _, name := range readme {
		if !slices.Contains(config, name) {
			t.Errorf("README.md names %s, which internal/config does not read", name)
		}
	}
}
