package openapi

// This file holds how the reference page reads a schema: its fields, type
// and constraints, with allOf merged.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/flowd/flowd/views/pages"
)

// fields lists the members of s, nested ones after their parent, in the order
// they are written.
func (r *reference) fields(out *[]pages.DocsField, prefix string, s *openapi3.Schema, depth int) {
	if depth > 6 {
		return
	}
	for _, name := range propertiesInOrder(s) {
		ref := s.Properties[name]
		p := merged(ref.Value)
		full := prefix + name
		*out = append(*out, pages.DocsField{
			Name: full, Depth: depth, Type: typeOf(p), Required: slices.Contains(s.Required, name),
			Constraints: constraints(p), DescriptionHTML: r.markdown(p.Description),
		})
		r.nested(out, full, p, depth+1)
	}
}

// nested lists the members inside an object, an array's items or a map's values.
func (r *reference) nested(out *[]pages.DocsField, full string, p *openapi3.Schema, depth int) {
	switch {
	case len(p.Properties) > 0:
		r.fields(out, full+".", p, depth)
	case p.Items != nil && p.Items.Value != nil && len(p.Items.Value.Properties) > 0:
		r.fields(out, full+"[].", merged(p.Items.Value), depth)
	case p.AdditionalProperties.Schema != nil && p.AdditionalProperties.Schema.Value != nil &&
		len(p.AdditionalProperties.Schema.Value.Properties) > 0:
		r.fields(out, full+".{key}.", merged(p.AdditionalProperties.Schema.Value), depth)
	}
}

// merged folds an allOf into one schema: the members of every part, the
// later parts' const, enum, pattern and examples narrowing the earlier ones'
// members.
func merged(s *openapi3.Schema) *openapi3.Schema {
	if s == nil || len(s.AllOf) == 0 {
		return s
	}
	out := *s
	out.AllOf = nil
	out.Properties = openapi3.Schemas{}
	for k, v := range s.Properties {
		out.Properties[k] = v
	}
	for _, part := range s.AllOf {
		if part.Value == nil {
			continue
		}
		p := merged(part.Value)
		if out.Type == nil {
			out.Type = p.Type
		}
		if out.Description == "" {
			out.Description = p.Description
		}
		out.Required = append(out.Required, p.Required...)
		for name, prop := range p.Properties {
			prev, ok := out.Properties[name]
			if !ok || prev.Value == nil || prop.Value == nil {
				out.Properties[name] = prop
				continue
			}
			narrowed := *prev.Value
			if prop.Value.Const != nil {
				narrowed.Const = prop.Value.Const
				narrowed.Enum = nil
			}
			if len(prop.Value.Enum) > 0 {
				narrowed.Enum = prop.Value.Enum
			}
			if prop.Value.Pattern != "" {
				narrowed.Pattern = prop.Value.Pattern
			}
			if len(prop.Value.Examples) > 0 {
				narrowed.Examples = prop.Value.Examples
			}
			out.Properties[name] = &openapi3.SchemaRef{Value: &narrowed, Origin: prev.Origin}
		}
	}
	return &out
}

// problemTypes returns the problem types a problem schema allows, each with
// the anchor of its section on the page (its fragment). A type is an
// absolute URI under the service's base URL, so the schema narrows it with a
// pattern and names it in examples.
func problemTypes(s *openapi3.Schema) []pages.DocsLink {
	// A response of several kinds of problem lists each one's type.
	if len(s.OneOf) > 0 {
		var out []pages.DocsLink
		for _, alt := range s.OneOf {
			if alt.Value != nil {
				out = append(out, problemTypes(merged(alt.Value))...)
			}
		}
		return out
	}
	t := s.Properties["type"]
	if t == nil || t.Value == nil {
		return nil
	}
	var out []pages.DocsLink
	for _, e := range t.Value.Examples {
		uri := fmt.Sprint(e)
		_, anchor, _ := strings.Cut(uri, "#")
		out = append(out, pages.DocsLink{ID: anchor, Title: uri})
	}
	return out
}

func propertiesInOrder(s *openapi3.Schema) []string {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		la, lb := line(s.Properties[a].Origin), line(s.Properties[b].Origin)
		if la != lb {
			return la - lb
		}
		return strings.Compare(a, b)
	})
	return names
}

// typeOf names a schema's type for people: "string (uuid)", "string or null",
// "array of object", "map of object".
func typeOf(s *openapi3.Schema) string {
	if s == nil {
		return "any"
	}
	var kinds []string
	null := false
	for _, t := range s.Type.Slice() {
		if t == "null" {
			null = true
			continue
		}
		kinds = append(kinds, t)
	}
	name := strings.Join(kinds, " or ")
	switch {
	case name == "" && s.Const != nil:
		name = fmt.Sprintf("%T", s.Const)
	case name == "":
		name = "any"
	case name == "array" && s.Items != nil && s.Items.Value != nil:
		name = "array of " + typeOf(merged(s.Items.Value))
	case name == "object" && s.AdditionalProperties.Schema != nil && s.AdditionalProperties.Schema.Value != nil:
		name = "map of " + typeOf(merged(s.AdditionalProperties.Schema.Value))
	}
	if s.Format != "" {
		name += " (" + s.Format + ")"
	}
	if null {
		name += " or null"
	}
	return name
}

// constraints lists a schema's rules for people.
func constraints(s *openapi3.Schema) []string {
	if s == nil {
		return nil
	}
	var out []string
	if s.Const != nil {
		out = append(out, "always "+literal(s.Const))
	}
	if len(s.Enum) > 0 {
		vals := make([]string, 0, len(s.Enum))
		for _, e := range s.Enum {
			vals = append(vals, literal(e))
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	if s.Items != nil && s.Items.Value != nil && len(s.Items.Value.Enum) > 0 {
		vals := make([]string, 0, len(s.Items.Value.Enum))
		for _, e := range s.Items.Value.Enum {
			vals = append(vals, literal(e))
		}
		out = append(out, "items: one of "+strings.Join(vals, ", "))
	}
	switch {
	case s.MinLength > 0 && s.MaxLength != nil:
		out = append(out, fmt.Sprintf("%d–%d characters", s.MinLength, *s.MaxLength))
	case s.MaxLength != nil:
		out = append(out, fmt.Sprintf("at most %d characters", *s.MaxLength))
	case s.MinLength > 0:
		out = append(out, fmt.Sprintf("at least %d characters", s.MinLength))
	}
	switch {
	case s.Min != nil && s.Max != nil:
		out = append(out, fmt.Sprintf("from %s to %s", num(*s.Min), num(*s.Max)))
	case s.Min != nil:
		out = append(out, "at least "+num(*s.Min))
	case s.Max != nil:
		out = append(out, "at most "+num(*s.Max))
	}
	if s.MaxItems != nil {
		out = append(out, fmt.Sprintf("at most %d items", *s.MaxItems))
	}
	if s.UniqueItems {
		out = append(out, "no duplicates")
	}
	if s.Pattern != "" {
		out = append(out, "matches "+s.Pattern)
	}
	if s.Default != nil {
		out = append(out, "default "+literal(s.Default))
	}
	if s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has {
		out = append(out, "no other members")
	}
	return out
}

func literal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
