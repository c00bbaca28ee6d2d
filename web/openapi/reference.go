package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"

	"github.com/flowd/flowd/views/pages"
)

// Reference builds the /docs page from the parsed document (Load) and its
// JSON form (JSON), which keeps the written order of the examples' members.
// Descriptions are CommonMark, as OpenAPI has them, rendered by goldmark (the
// CommonMark library of the Go world) with raw HTML escaped.
func Reference(doc *openapi3.T, raw []byte, baseURL string) (pages.DocsPage, error) {
	r := &reference{doc: doc, raw: raw, objects: map[string]map[string]json.RawMessage{}, md: goldmark.New(
		goldmark.WithExtensions(extension.Table),
		goldmark.WithParserOptions(parser.WithAutoHeadingID()),
	)}
	p := pages.DocsPage{
		Title:   doc.Info.Title,
		Version: doc.Info.Version,
		Summary: doc.Info.Summary,
		BaseURL: baseURL,
		JSONURL: "/api/openapi.json",
	}
	p.IntroHTML, p.Intro = r.markdownWithContents(doc.Info.Description)
	p.Schemes = r.schemes()

	type located struct {
		op     pages.DocsOperation
		tag    string
		line   int
		method string
	}
	var ops []located
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			v, err := r.operation(path, method, item, op)
			if err != nil {
				return p, err
			}
			tag := ""
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			ops = append(ops, located{op: v, tag: tag, line: line(op.Origin), method: method})
		}
	}
	slices.SortFunc(ops, func(a, b located) int {
		if a.line != b.line {
			return a.line - b.line
		}
		return strings.Compare(a.op.ID, b.op.ID)
	})
	for _, t := range doc.Tags {
		g := pages.DocsGroup{ID: "tag-" + slug(t.Name), Name: t.Name, DescriptionHTML: r.markdown(t.Description)}
		for _, o := range ops {
			if o.tag == t.Name {
				g.Operations = append(g.Operations, o.op)
			}
		}
		if len(g.Operations) > 0 {
			p.Groups = append(p.Groups, g)
		}
	}

	// Webhooks too are shown in the order they are written.
	var hooks []located
	for name, item := range doc.Webhooks {
		for method, op := range item.Operations() {
			v, err := r.webhook(name, method, op)
			if err != nil {
				return p, err
			}
			hooks = append(hooks, located{op: v, line: line(op.Origin), method: method})
		}
	}
	slices.SortFunc(hooks, func(a, b located) int { return a.line - b.line })
	for _, h := range hooks {
		p.Webhooks = append(p.Webhooks, h.op)
	}
	return p, nil
}

type reference struct {
	doc     *openapi3.T
	raw     []byte
	objects map[string]map[string]json.RawMessage // decoded objects of raw by JSON pointer
	md      goldmark.Markdown
}

func (r *reference) operation(path, method string, item *openapi3.PathItem, op *openapi3.Operation) (pages.DocsOperation, error) {
	v := pages.DocsOperation{
		ID:              op.OperationID,
		Method:          method,
		Path:            path,
		Summary:         op.Summary,
		DescriptionHTML: r.markdown(op.Description),
	}
	v.Auth, v.Scopes = r.auth(op)
	params := append(slices.Clone(item.Parameters), op.Parameters...)
	for _, p := range params {
		v.Parameters = append(v.Parameters, r.param(p.Value.Name, p.Value.In, p.Value.Required, p.Value.Description, p.Value.Schema, p.Value.Example))
	}
	return r.bodies(v, "/paths/"+escapePointer(path)+"/"+strings.ToLower(method), op)
}

// bodies fills in the request body and responses of v, an operation whose
// place in the document is the JSON pointer base.
func (r *reference) bodies(v pages.DocsOperation, base string, op *openapi3.Operation) (pages.DocsOperation, error) {
	if op.RequestBody != nil {
		b, err := r.requestBody(base, op.RequestBody)
		if err != nil {
			return v, err
		}
		v.RequestBody = &b
	}
	resps, err := r.responses(base, op.Responses)
	if err != nil {
		return v, err
	}
	v.Responses = resps
	return v, nil
}

func (r *reference) webhook(name, method string, op *openapi3.Operation) (pages.DocsOperation, error) {
	v := pages.DocsOperation{
		ID:              "webhook-" + slug(name),
		Method:          method,
		Path:            "{webhookUrl}",
		Summary:         op.Summary,
		DescriptionHTML: r.markdown(op.Description),
	}
	v.Auth, v.Scopes = r.auth(op)
	if op.Security != nil && len(*op.Security) == 0 {
		// A webhook names no security requirement, which ogen could not
		// generate; its receiver verifies the signature header.
		v.Auth = "the webhook-signature header (see the security scheme webhookSignature)"
	}
	for _, p := range op.Parameters {
		v.Parameters = append(v.Parameters, r.param(p.Value.Name, p.Value.In, p.Value.Required, p.Value.Description, p.Value.Schema, p.Value.Example))
	}
	return r.bodies(v, "/webhooks/"+escapePointer(name)+"/"+strings.ToLower(method), op)
}

// auth says in words who may call op, and with which scopes.
func (r *reference) auth(op *openapi3.Operation) (string, []string) {
	if op.Security == nil || len(*op.Security) == 0 {
		return "none, public", nil
	}
	var scopes, ways []string
	for _, req := range *op.Security {
		if len(req) == 0 {
			ways = append(ways, "client id and secret in the form")
		}
		for name, ss := range req {
			scheme := r.doc.Components.SecuritySchemes[name]
			switch {
			case scheme != nil && scheme.Value.Type == "oauth2":
				ways = append(ways, "a bearer access token with the scope")
				scopes = append(scopes, ss...)
			case scheme != nil && scheme.Value.Type == "http" && strings.EqualFold(scheme.Value.Scheme, "DPoP"):
				ways = append(ways, "a DPoP-bound access token with the scope and its DPoP proof")
			case scheme != nil && scheme.Value.Type == "http":
				ways = append(ways, "HTTP "+scheme.Value.Scheme+" authentication with the client id and secret")
			case scheme != nil && scheme.Value.Type == "apiKey":
				ways = append(ways, "the "+scheme.Value.Name+" "+scheme.Value.In+" (see the security scheme "+name+")")
			default:
				ways = append(ways, name)
			}
		}
	}
	return strings.Join(ways, ", or "), scopes
}

// schemes describes the document's security schemes in their written order,
// each under the anchor scheme-<name> that the prose links to.
func (r *reference) schemes() []pages.DocsScheme {
	names := sortedKeys(r.doc.Components.SecuritySchemes)
	slices.SortStableFunc(names, func(a, b string) int {
		return line(r.doc.Components.SecuritySchemes[a].Value.Origin) - line(r.doc.Components.SecuritySchemes[b].Value.Origin)
	})
	out := make([]pages.DocsScheme, 0, len(names))
	for _, name := range names {
		s := r.doc.Components.SecuritySchemes[name].Value
		v := pages.DocsScheme{ID: "scheme-" + slug(name), Name: name, DescriptionHTML: r.markdown(s.Description)}
		switch s.Type {
		case "oauth2":
			v.Kind = "OAuth 2.0"
			if f := s.Flows; f != nil && f.ClientCredentials != nil {
				v.Kind += ", client credentials; token URL " + f.ClientCredentials.TokenURL
				v.Scopes = sortedKeys(f.ClientCredentials.Scopes)
			}
		case "http":
			v.Kind = "HTTP " + s.Scheme + " authentication"
		case "apiKey":
			v.Kind = "the " + s.In + " " + s.Name
		default:
			v.Kind = s.Type
		}
		out = append(out, v)
	}
	return out
}

func (r *reference) param(name, in string, required bool, description string, schema *openapi3.SchemaRef, example any) pages.DocsParam {
	p := pages.DocsParam{Name: name, In: in, Required: required, DescriptionHTML: r.markdown(description)}
	if schema != nil && schema.Value != nil {
		p.Type = typeOf(schema.Value)
		p.Constraints = constraints(schema.Value)
		if p.DescriptionHTML == "" {
			p.DescriptionHTML = r.markdown(schema.Value.Description)
		}
	}
	if example != nil {
		p.Example = fmt.Sprint(example)
	}
	return p
}

func (r *reference) requestBody(base string, ref *openapi3.RequestBodyRef) (pages.DocsBody, error) {
	for _, mt := range sortedKeys(ref.Value.Content) {
		return r.body(base+"/requestBody/content/"+escapePointer(mt), mt, ref.Value.Content[mt])
	}
	return pages.DocsBody{}, nil
}

func (r *reference) responses(base string, responses *openapi3.Responses) ([]pages.DocsResponse, error) {
	codes := make([]string, 0, responses.Len())
	for code := range responses.Map() {
		codes = append(codes, code)
	}
	slices.SortFunc(codes, func(a, b string) int {
		if a == "default" || b == "default" {
			return boolCmp(a == "default", b == "default")
		}
		return strings.Compare(a, b)
	})
	var out []pages.DocsResponse
	for _, code := range codes {
		ref := responses.Value(code)
		v := pages.DocsResponse{Status: statusText(code), DescriptionHTML: r.markdown(deref(ref.Value.Description))}
		for _, name := range sortedKeys(ref.Value.Headers) {
			h := ref.Value.Headers[name].Value
			v.Headers = append(v.Headers, r.param(name, "header", h.Required, h.Description, h.Schema, h.Example))
		}
		at := base + "/responses/" + escapePointer(code)
		if ref.Ref != "" {
			at = strings.TrimPrefix(ref.Ref, "#")
		}
		for _, mt := range sortedKeys(ref.Value.Content) {
			b, err := r.body(at+"/content/"+escapePointer(mt), mt, ref.Value.Content[mt])
			if err != nil {
				return nil, err
			}
			v.Bodies = append(v.Bodies, b)
		}
		out = append(out, v)
	}
	return out, nil
}

// body describes one media type of a body; at is its JSON pointer in the
// document, where its examples are read in their written member order.
func (r *reference) body(at, contentType string, mt *openapi3.MediaType) (pages.DocsBody, error) {
	b := pages.DocsBody{ContentType: contentType}
	if mt.Schema != nil && mt.Schema.Value != nil {
		s := merged(mt.Schema.Value)
		if strings.HasSuffix(contentType, "problem+json") {
			b.ProblemTypes = problemTypes(s)
		}
		if len(b.ProblemTypes) == 0 {
			r.fields(&b.Fields, "", s, 0)
		}
	}
	for _, name := range sortedKeys(mt.Examples) {
		ex := mt.Examples[name]
		ptr := at + "/examples/" + escapePointer(name) + "/value"
		if ex.Ref != "" {
			ptr = strings.TrimPrefix(ex.Ref, "#") + "/value"
		}
		body, err := r.example(ptr, contentType)
		if err != nil {
			return b, err
		}
		title := ex.Value.Summary
		if title == "" {
			title = name
		}
		b.Examples = append(b.Examples, pages.DocsExample{Title: title, Body: body})
	}
	return b, nil
}

// example returns the example at ptr as written: indented JSON, or a form
// body for application/x-www-form-urlencoded.
func (r *reference) example(ptr, contentType string) (string, error) {
	raw, err := r.lookup(ptr)
	if err != nil {
		return "", fmt.Errorf("openapi: example %s: %w", ptr, err)
	}
	if contentType == "application/x-www-form-urlencoded" {
		return formOf(raw)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return "", err
	}
	return out.String(), nil
}

func (r *reference) markdown(src string) string {
	if strings.TrimSpace(src) == "" {
		return ""
	}
	var buf bytes.Buffer
	if err := r.md.Convert([]byte(src), &buf); err != nil {
		return "<p>" + templEscape(src) + "</p>"
	}
	return buf.String()
}

// markdownWithContents renders src and lists its second-level headings.
func (r *reference) markdownWithContents(src string) (string, []pages.DocsLink) {
	b := []byte(src)
	root := r.md.Parser().Parse(text.NewReader(b))
	var links []pages.DocsLink
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if h, ok := n.(*ast.Heading); ok && entering && h.Level == 2 {
			id, _ := h.AttributeString("id")
			idb, _ := id.([]byte)
			links = append(links, pages.DocsLink{ID: string(idb), Title: nodeText(h, b)})
		}
		return ast.WalkContinue, nil
	})
	var buf bytes.Buffer
	if err := r.md.Renderer().Render(&buf, b, root); err != nil {
		return "<p>" + templEscape(src) + "</p>", links
	}
	return buf.String(), links
}

func nodeText(n ast.Node, src []byte) string {
	var sb strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch t := c.(type) {
		case *ast.Text:
			sb.Write(t.Value(src))
		case *ast.String:
			sb.Write(t.Value)
		}
		return ast.WalkContinue, nil
	})
	return sb.String()
}

func statusText(code string) string {
	n, err := strconv.Atoi(code)
	if err != nil {
		if code == "default" {
			return "Any other"
		}
		return code
	}
	return code + " " + http.StatusText(n)
}

func line(o *openapi3.Origin) int {
	if o == nil || o.Key == nil {
		return 1 << 30
	}
	return o.Key.Line
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// escapePointer escapes one JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// lookup returns the raw JSON at ptr in the document, with its members in
// the order they are written. Objects on the way are decoded once.
func (r *reference) lookup(ptr string) (json.RawMessage, error) {
	cur := json.RawMessage(r.raw)
	at := ""
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		obj, ok := r.objects[at]
		if !ok {
			if err := json.Unmarshal(cur, &obj); err != nil {
				return nil, fmt.Errorf("%q is not inside an object", tok)
			}
			r.objects[at] = obj
		}
		at += "/" + tok
		name := strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		next, ok := obj[name]
		if !ok {
			return nil, fmt.Errorf("no member %q", name)
		}
		cur = next
	}
	return cur, nil
}

// formOf writes a flat JSON object as a form body, members in written order.
func formOf(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", fmt.Errorf("a form example must be an object")
	}
	var parts []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return "", err
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", err
		}
		parts = append(parts, url.QueryEscape(fmt.Sprint(k))+"="+url.QueryEscape(fmt.Sprint(v)))
	}
	return strings.Join(parts, "&"), nil
}

func templEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}
