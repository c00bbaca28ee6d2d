// Package openapi holds flowd's OpenAPI 3.1 document: written by hand from the
// product contract in openapi.yaml, embedded in the binary, served as JSON at
// /api/openapi.json and rendered for people at /docs. The test suite checks
// every API response against it (package openapitest), so the document and
// the service cannot drift apart.
//
// kin-openapi parses and validates the document: it is the maintained Go
// library that understands OpenAPI 3.1 (JSON Schema 2020-12) both for loading
// a document and for validating HTTP responses against it.
package openapi

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"
)

// DefaultBaseURL is the base URL the document is written with; JSON and Load
// put the service's own base URL in its place.
const DefaultBaseURL = "http://localhost:8080"

//go:embed openapi.yaml
var source []byte

// YAML returns the document exactly as written.
func YAML() []byte { return bytes.Clone(source) }

// JSON returns the document as indented JSON, members in the order they are
// written, with every occurrence of DefaultBaseURL in its strings (servers,
// token URL, examples, prose) replaced by baseURL.
func JSON(baseURL string) ([]byte, error) {
	doc, err := defaultJSON()
	if err != nil {
		return nil, err
	}
	baseURL = strings.TrimSuffix(baseURL, "/")
	if baseURL == "" || baseURL == DefaultBaseURL {
		return bytes.Clone(doc), nil
	}
	// Every server and every test instance has a base URL of its own: the
	// document is written once, and the base URL put in its text, escaped
	// as the JSON strings that hold it are.
	quoted, err := json.Marshal(baseURL)
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(doc, []byte(DefaultBaseURL), quoted[1:len(quoted)-1]), nil
}

// defaultJSON is the document as JSON with DefaultBaseURL, made once.
var defaultJSON = sync.OnceValues(func() ([]byte, error) {
	root, err := tree(DefaultBaseURL)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, root); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("openapi: indenting: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
})

// Load parses the document for baseURL with every reference resolved and the
// source line of each element kept (Origin), so that renderers can list
// operations and members in the order they are written. It does not validate
// the document, which takes longer than parsing it: the tests do (LoadData).
func Load(baseURL string) (*openapi3.T, error) {
	root, err := tree(baseURL)
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("openapi: writing YAML: %w", err)
	}
	loader := openapi3.NewLoader()
	loader.IncludeOrigin = true
	doc, err := loader.LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("openapi: loading the document: %w", err)
	}
	return doc, nil
}

// tree parses the embedded document and puts baseURL in the place of
// DefaultBaseURL in every string.
func tree(baseURL string) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(source, &root); err != nil {
		return nil, fmt.Errorf("openapi: parsing openapi.yaml: %w", err)
	}
	baseURL = strings.TrimSuffix(baseURL, "/")
	if baseURL != "" && baseURL != DefaultBaseURL {
		replaceBaseURL(&root, baseURL)
	}
	return &root, nil
}

func replaceBaseURL(n *yaml.Node, baseURL string) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		n.Value = strings.ReplaceAll(n.Value, DefaultBaseURL, baseURL)
	}
	for _, c := range n.Content {
		replaceBaseURL(c, baseURL)
	}
}

// Written is the embedded document with DefaultBaseURL, loaded and validated
// once per process: loading is slow, and readers that do not change the
// document (tests, mostly) share it.
var Written = sync.OnceValues(func() (*openapi3.T, error) { return LoadData(YAML()) })

// LoadData parses a document given as JSON or YAML and validates it,
// examples included.
func LoadData(b []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IncludeOrigin = true
	doc, err := loader.LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("openapi: loading the document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi: the document is invalid: %w", err)
	}
	return doc, nil
}

// writeJSON writes the YAML node n as JSON, keeping the order of mapping keys.
func writeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("openapi: line %d: want one YAML document", n.Line)
		}
		return writeJSON(buf, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("openapi: line %d: a mapping key must be a scalar", k.Line)
			}
			writeString(buf, k.Value)
			buf.WriteByte(':')
			if err := writeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			buf.WriteString("null")
		case "!!bool":
			b, err := strconv.ParseBool(n.Value)
			if err != nil {
				return fmt.Errorf("openapi: line %d: %q is not a boolean", n.Line, n.Value)
			}
			buf.WriteString(strconv.FormatBool(b))
		case "!!int":
			i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
			if err != nil {
				return fmt.Errorf("openapi: line %d: %q is not an integer", n.Line, n.Value)
			}
			buf.WriteString(strconv.FormatInt(i, 10))
		case "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil {
				return fmt.Errorf("openapi: line %d: %q is not a JSON number", n.Line, n.Value)
			}
			buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		default: // !!str, and !!timestamp kept as written
			writeString(buf, n.Value)
		}
	default:
		return fmt.Errorf("openapi: line %d: unexpected YAML node", n.Line)
	}
	return nil
}

// writeString writes s as a JSON string without escaping <, > and &, which
// the prose and examples use and which are safe in a JSON document.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Truncate(buf.Len() - 1)
}
