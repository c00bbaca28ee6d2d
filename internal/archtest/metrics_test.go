package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// metricName matches a name of flowd's metrics where a query uses it.
	metricName = regexp.MustCompile(`\bflowd_[a-z0-9_]*[a-z0-9]\b`)
	// definedMetric matches a metric's name as Go code defines it: a string
	// literal of its own.
	definedMetric = regexp.MustCompile(`"(flowd_[a-z0-9_]*[a-z0-9])"`)
)

// TestDashboardsUseMetricsFlowdExports: every metric the Grafana dashboard
// and the alert rules query is one flowd's code defines, and each is
// documented in docs/observability.md, so that a renamed metric does not
// leave a panel or an alert silently empty.
func TestDashboardsUseMetricsFlowdExports(t *testing.T) {
	defined := map[string]bool{}
	err := filepath.WalkDir(root(t), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range definedMetric.FindAllStringSubmatch(string(raw), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile(filepath.Join(root(t), "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"deploy/grafana/flowd.json", "deploy/prometheus/alerts.yml"} {
		raw, err := os.ReadFile(filepath.Join(root(t), file))
		if err != nil {
			t.Fatal(err)
		}
		used := metricName.FindAllString(string(raw), -1)
		slices.Sort(used)
		used = slices.Compact(used)
		if len(used) < 5 {
			t.Fatalf("%s queries only %v", file, used)
		}
		for _, name := range used {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if trimmed, ok := strings.CutSuffix(name, suffix); ok && defined[trimmed] {
					base = trimmed
				}
			}
			if !defined[base] {
				t.Errorf("%s queries %s, which no code of flowd defines", file, name)
			}
			if !strings.Contains(string(docs), "`"+base+"`") {
				t.Errorf("%s queries %s, which docs/observability.md does not document", file, base)
			}
		}
	}
}
