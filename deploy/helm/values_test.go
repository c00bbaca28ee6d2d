package chart

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	yaml3 "go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the values table of flowd/README.md from flowd/values.yaml")

const (
	tableBegin = "<!-- values:begin (generated from values.yaml by `go test -update` in deploy/helm) -->"
	tableEnd   = "<!-- values:end -->"
)

// TestReadmeDocumentsEveryValue: the chart README's table of values is the
// one generated from values.yaml's comments, so that it lists every value
// with its default and cannot drift; go test -update rewrites it.
func TestReadmeDocumentsEveryValue(t *testing.T) {
	raw, err := os.ReadFile("flowd/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	table, err := valuesTable(raw)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("flowd/README.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(readme), tableBegin)
	_, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("flowd/README.md lacks the lines %s and %s around the values table", tableBegin, tableEnd)
	}
	want := before + tableBegin + "\n" + table + tableEnd + after
	if want == string(readme) {
		return
	}
	if *update {
		if err := os.WriteFile("flowd/README.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := strings.Split(strings.TrimPrefix(rest[:strings.Index(rest, tableEnd)], "\n"), "\n")
	wantRows := strings.Split(table, "\n")
	for _, row := range wantRows {
		if !slices.Contains(got, row) {
			t.Errorf("flowd/README.md lacks the row %s", row)
		}
	}
	for _, row := range got {
		if !slices.Contains(wantRows, row) {
			t.Errorf("flowd/README.md has the row %s, which values.yaml does not make", row)
		}
	}
	t.Errorf("flowd/README.md's values table is not the one values.yaml makes: run go test -update in deploy/helm")
}

// valuesTable makes the Markdown table of values: a key with a comment is a
// row, its default as JSON; a key without one is a group of rows. A value
// without a comment, outside a group, is an error.
func valuesTable(raw []byte) (string, error) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(raw, &doc); err != nil {
		return "", err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml3.MappingNode {
		return "", fmt.Errorf("values.yaml is not a mapping")
	}
	var b strings.Builder
	b.WriteString("| value | default | meaning |\n| --- | --- | --- |\n")
	if err := rows(&b, "", doc.Content[0]); err != nil {
		return "", err
	}
	return b.String(), nil
}

func rows(b *strings.Builder, prefix string, m *yaml3.Node) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, value := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		comment := commentText(key.HeadComment)
		if comment == "" {
			if value.Kind != yaml3.MappingNode || len(value.Content) == 0 {
				return fmt.Errorf("values.yaml: %s has no comment: say above it what it does", path)
			}
			if err := rows(b, path+".", value); err != nil {
				return err
			}
			continue
		}
		var v any
		if err := value.Decode(&v); err != nil {
			return fmt.Errorf("values.yaml: %s: %w", path, err)
		}
		def, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("values.yaml: %s: %w", path, err)
		}
		fmt.Fprintf(b, "| `%s` | `%s` | %s |\n", path, strings.ReplaceAll(string(def), "|", `\|`), strings.ReplaceAll(comment, "|", `\|`))
	}
	return nil
}

// commentText joins a head comment's lines into one sentence, leaving out
// any paragraph but the last (the file's own header, above the first key).
func commentText(c string) string {
	paragraphs := strings.Split(strings.TrimSpace(c), "\n\n")
	var words []string
	for _, line := range strings.Split(paragraphs[len(paragraphs)-1], "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line != "" {
			words = append(words, line)
		}
	}
	return strings.Join(words, " ")
}
