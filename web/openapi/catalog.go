package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// EventType is one entry of the webhook event catalog: a type the
// document's webhooks deliver, with the JSON Schema of its body and an
// example of it.
type EventType struct {
	Type        string `json:"type"`
	Description string `json:"description"`
	// Schema is self-contained: every $ref of the document is resolved in
	// it, and its type member is the event's type alone.
	Schema  map[string]any `json:"schema"`
	Example any            `json:"example"`
}

// EventCatalog returns the event types of the document's webhooks, by
// type: each webhook's request body schema narrowed to one of the types its
// type member allows. A type's description is its row in the webhook's
// table of types (its "when" column), or the webhook's summary.
func EventCatalog() (map[string]EventType, error) {
	b, err := JSON("")
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	hooks, _ := doc["webhooks"].(map[string]any)
	out := map[string]EventType{}
	for name, h := range hooks {
		op := dig(h, "post")
		schema, _ := dig(op, "requestBody", "content", "application/json", "schema").(map[string]any)
		if schema == nil {
			return nil, fmt.Errorf("openapi: webhook %s has no JSON body schema", name)
		}
		resolved, err := resolve(doc, schema, 0)
		if err != nil {
			return nil, fmt.Errorf("openapi: webhook %s: %w", name, err)
		}
		examples, _ := dig(op, "requestBody", "content", "application/json", "examples").(map[string]any)
		description, _ := dig(op, "description").(string)
		summary, _ := dig(op, "summary").(string)
		for _, t := range typesOf(resolved.(map[string]any)) {
			s := narrow(resolved.(map[string]any), t)
			et := EventType{Type: t, Description: tableRow(description, t), Schema: s, Example: exampleOf(examples, t)}
			if et.Description == "" {
				et.Description = summary
			}
			out[t] = et
		}
	}
	return out, nil
}

// dig walks v's members by name; nil when one is missing.
func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// resolve returns v with every "#/..." $ref replaced by what it names; the
// members beside a $ref (a description) are kept over the target's.
func resolve(doc map[string]any, v any, depth int) (any, error) {
	if depth > 32 {
		return nil, fmt.Errorf("a $ref cycle")
	}
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		if ref, ok := x["$ref"].(string); ok {
			target := dig(doc, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
			if target == nil {
				return nil, fmt.Errorf("$ref %s names nothing", ref)
			}
			r, err := resolve(doc, target, depth+1)
			if err != nil {
				return nil, err
			}
			for k, v := range r.(map[string]any) {
				out[k] = v
			}
		}
		for k, v := range x {
			if k == "$ref" {
				continue
			}
			r, err := resolve(doc, v, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			r, err := resolve(doc, v, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// typesOf returns the event types a body schema's type member allows.
func typesOf(schema map[string]any) []string {
	t, _ := dig(schema, "properties", "type").(map[string]any)
	if c, ok := t["const"].(string); ok {
		return []string{c}
	}
	var out []string
	enum, _ := t["enum"].([]any)
	for _, e := range enum {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// narrow returns a copy of schema whose type member is t alone.
func narrow(schema map[string]any, t string) map[string]any {
	out := map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema"}
	for k, v := range schema {
		out[k] = v
	}
	props := map[string]any{}
	for k, v := range schema["properties"].(map[string]any) {
		props[k] = v
	}
	typ := map[string]any{"type": "string", "const": t}
	if d, ok := dig(props, "type", "description").(string); ok {
		typ["description"] = d
	}
	props["type"] = typ
	out["properties"] = props
	return out
}

// exampleOf returns the value of the example of type t; nil when none.
func exampleOf(examples map[string]any, t string) any {
	for _, e := range examples {
		v := dig(e, "value")
		if dig(v, "type") == t {
			return v
		}
	}
	return nil
}

var tableCell = regexp.MustCompile(`\s*\|\s*`)

// tableRow returns the second cell of the Markdown table row of
// description whose first cell is the type t in backquotes.
func tableRow(description, t string) string {
	for _, line := range strings.Split(description, "\n") {
		cells := tableCell.Split(strings.Trim(strings.TrimSpace(line), "|"), -1)
		if len(cells) >= 2 && strings.TrimSpace(cells[0]) == "`"+t+"`" && strings.TrimSpace(cells[1]) != "" {
			d := strings.TrimSpace(cells[1])
			return strings.ToUpper(d[:1]) + d[1:] + "."
		}
	}
	return ""
}
