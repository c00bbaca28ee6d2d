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

var update = flag.Bool("update", false, "rewrite flowd/README.md's values table and flowd/values.schema.json from flowd/values.yaml")

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

// TestSchemaFollowsValues: values.schema.json, which Helm checks every
// install's values against, is the one values.yaml makes, so that a value
// misspelt in a values file (replicaCont) fails instead of being ignored;
// go test -update rewrites it.
func TestSchemaFollowsValues(t *testing.T) {
	raw, err := os.ReadFile("flowd/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	root := schemaOf(doc.Content[0], "")
	root["$schema"] = "https://json-schema.org/draft-07/schema#"
	root["title"] = "Values of the flowd chart (generated from values.yaml by go test -update in deploy/helm)"
	// Helm gives every chart a global value, which a subchart shares.
	root["properties"].(map[string]any)["global"] = map[string]any{"type": "object"}
	want, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	got, err := os.ReadFile("flowd/values.schema.json")
	if err == nil && string(got) == string(want) {
		return
	}
	if *update {
		if err := os.WriteFile("flowd/values.schema.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("flowd/values.schema.json is not the one values.yaml makes (%v): run go test -update in deploy/helm", err)
}

// schemaOf is the JSON schema of one value of values.yaml: a group (a key
// without a comment) allows only the keys it has; a commented mapping, such
// as resources or labels, is the user's to fill; a scalar keeps its type.
func schemaOf(n *yaml3.Node, comment string) map[string]any {
	s := map[string]any{}
	if comment != "" {
		s["description"] = comment
	}
	switch {
	case n.Kind == yaml3.MappingNode && len(n.Content) > 0 && comment == "":
		props := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			props[n.Content[i].Value] = schemaOf(n.Content[i+1], commentText(n.Content[i].HeadComment))
		}
		s["type"], s["properties"], s["additionalProperties"] = "object", props, false
	case n.Kind == yaml3.MappingNode:
		s["type"] = "object"
	case n.Kind == yaml3.SequenceNode:
		s["type"] = "array"
	case n.Tag == "!!int":
		s["type"] = "integer"
	case n.Tag == "!!bool":
		s["type"] = "boolean"
	default:
		// A number given where a string is expected (--set image.tag=1.0)
		// is taken as it is.
		s["type"] = []string{"string", "number"}
	}
	return s
}
