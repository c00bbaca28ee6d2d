package httpkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/jsondup"
)

// DecodeJSON reads the request body, a JSON object, into dst, a pointer to a
// struct with json tags. Unlike json.Decoder it does not stop at the first
// problem: every unknown field, every field of the wrong type and every
// member given twice in one object (exactly or but for case, nested ones
// too: encoding/json would keep the last, a proxy may read the first) is
// named in the one 400 it returns. A body that is not application/json is a
// 415, one over the limit a 413.
func DecodeJSON(c echo.Context, dst any) error {
	mediaType, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil || (mediaType != echo.MIMEApplicationJSON && !strings.HasSuffix(mediaType, "+json")) {
		return apperr.New(apperr.UnsupportedMediaType, "The request body must be application/json.")
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) && he.Code == 413 {
			return apperr.New(apperr.TooLarge, "The request body is too large: 64 KiB at most, 256 KiB for a consent definition.")
		}
		return apperr.Wrap(err, apperr.Invalid, "The request body could not be read.")
	}
	if !utf8.Valid(body) {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "", Message: "the body is not valid UTF-8"}})
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "", Message: "the body must be one JSON object"}})
	}
	if _, err := dec.Token(); err != io.EOF {
		return apperr.InvalidFields([]apperr.FieldError{{Field: "", Message: "the body must hold nothing after the JSON object"}})
	}

	var problems apperr.Fields
	for _, d := range jsondup.Find(body) {
		problems.Add(d.Path, "%s", duplicateMessage(d))
	}
	v := reflect.ValueOf(dst).Elem()
	fields := jsonFields(v.Type())
	for _, name := range sortedKeys(raw) {
		if len(problems) > 0 && slices.ContainsFunc(problems, func(p apperr.FieldError) bool { return p.Field == name }) {
			continue // given twice: named already
		}
		i, ok := fields[name]
		if !ok {
			problems.Add(name, "unknown field")
			continue
		}
		if err := json.Unmarshal(raw[name], v.Field(i).Addr().Interface()); err != nil {
			problems.Add(name, "must be %s", describe(v.Field(i).Type()))
		}
	}
	return problems.Err()
}

// duplicateMessage says what is wrong with a member given twice.
func duplicateMessage(d jsondup.Duplicate) string {
	if d.Name == d.Earlier {
		return "is given more than once"
	}
	return fmt.Sprintf("is given more than once: names are matched without regard to case, and %q comes before it", d.Earlier)
}

// jsonFields maps each JSON name of struct type t to its field index.
func jsonFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = i
	}
	return m
}

func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a stable order of field errors
	return keys
}

// WithFieldErrors adds to decodeErr, an Invalid error of DecodeJSON, the
// field errors of validateErr for fields it does not name yet. Any other
// decodeErr (415, 413, a body that is not an object) is returned as it is.
func WithFieldErrors(decodeErr, validateErr error) error {
	d, ok := apperr.As(decodeErr)
	v, vok := apperr.As(validateErr)
	if !ok || d.Code != apperr.Invalid || !vok || len(d.Fields) == 0 || (len(d.Fields) == 1 && d.Fields[0].Field == "") {
		return decodeErr
	}
	fields := slices.Clone(d.Fields)
	for _, f := range v.Fields {
		if !slices.ContainsFunc(fields, func(g apperr.FieldError) bool { return g.Field == f.Field }) {
			fields = append(fields, f)
		}
	}
	slices.SortStableFunc(fields, func(a, b apperr.FieldError) int { return strings.Compare(a.Field, b.Field) })
	return apperr.InvalidFields(fields)
}
