package record

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schema is the JSON Schema (draft 2020-12) of records and of receipts'
// claims: one document, so that one URL checks both, with each kind under
// $defs for a check of that kind alone.
//
//go:embed consent-record.json
var schema []byte

// schemaBase is the base URL the embedded schema's $id is written with,
// flowd's default; Schema puts the deployment's in its place.
const schemaBase = "http://localhost:8080"

// Schema returns the schema with its $id under baseURL.
func Schema(baseURL string) []byte {
	return bytes.Replace(schema, []byte(`"$id": "`+schemaBase), []byte(`"$id": "`+strings.TrimRight(baseURL, "/")), 1)
}

// Kinds of document Check tells apart.
const (
	KindRecord  = "record"
	KindReceipt = "receipt"
	// KindEither is a document that is neither plainly: it is checked
	// against the schema's oneOf.
	KindEither = "record or receipt"
)

// Violation is one way a document breaks the schema: where (a JSON
// pointer into the document, "" for the whole) and what.
type Violation struct {
	Pointer string
	Message string
}

var compiled = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := schemaBase + SchemaPath
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	for kind, ref := range map[string]string{KindRecord: "#/$defs/record", KindReceipt: "#/$defs/receipt", KindEither: ""} {
		if out[kind], err = c.Compile(url + ref); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// ErrNotJSON is what Check returns for a document that is neither JSON
// nor a compact JWS with a JSON payload.
var ErrNotJSON = errors.New("not JSON, nor a compact JWS with a JSON payload")

// Check checks doc, a record or a receipt's claims in JSON, or a receipt
// as its compact JWS (whose payload it decodes without checking the
// signature), against the schema. It returns the kind it took doc for and
// every violation, sorted by pointer; none when doc is valid.
func Check(doc []byte) (kind string, violations []Violation, err error) {
	doc = bytes.TrimSpace(doc)
	fromJWS := false
	if len(doc) > 0 && doc[0] != '{' && bytes.Count(doc, []byte(".")) == 2 {
		payload, err := base64.RawURLEncoding.DecodeString(string(bytes.Split(doc, []byte("."))[1]))
		if err != nil {
			return "", nil, fmt.Errorf("%w: the JWS payload is not base64url", ErrNotJSON)
		}
		doc, fromJWS = payload, true
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return "", nil, ErrNotJSON
	}
	kind = KindEither
	if obj, ok := inst.(map[string]any); ok {
		switch {
		case fromJWS:
			kind = KindReceipt
		case obj["record_id"] != nil || obj["schema_version"] != nil:
			kind = KindRecord
		case obj["jti"] != nil || obj["iss"] != nil:
			kind = KindReceipt
		}
	}
	schemas, err := compiled()
	if err != nil {
		return "", nil, fmt.Errorf("record: the embedded schema: %w", err)
	}
	err = schemas[kind].Validate(inst)
	var invalid *jsonschema.ValidationError
	if !errors.As(err, &invalid) {
		return kind, nil, err
	}
	violations = leaves(invalid, nil)
	sort.SliceStable(violations, func(i, j int) bool { return violations[i].Pointer < violations[j].Pointer })
	return kind, violations, nil
}

// leaves appends the violations at the leaves of e's tree: the causes,
// not the "allOf failed" above them.
func leaves(e *jsonschema.ValidationError, out []Violation) []Violation {
	if len(e.Causes) == 0 {
		msg := e.Error()
		if o := e.BasicOutput(); o.Error != nil {
			msg = o.Error.String()
		}
		return append(out, Violation{Pointer: pointer(e.InstanceLocation), Message: msg})
	}
	for _, c := range e.Causes {
		out = leaves(c, out)
	}
	return out
}

// pointer writes a JSON pointer (RFC 6901) of tokens.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}
