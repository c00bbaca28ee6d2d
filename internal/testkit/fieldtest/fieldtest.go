// Package fieldtest helps a test catch a field that a mapping forgot: it
// fills every field of a struct with a value that is not zero and differs
// from every other field's, and lists a struct's fields by path, so that a
// test can follow each field through a mapping by reflection instead of
// naming them all.
package fieldtest

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// Field is a field of a struct that holds a value (not a struct of fields
// itself), named by its path: "Evidence.ACR".
type Field struct {
	Path  string
	Name  string // the last part of Path
	Value reflect.Value
}

// Fields lists the exported fields of the struct v (or *v), going into
// nested structs other than time.Time.
func Fields(v any) []Field {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	return appendFields(nil, "", rv)
}

func appendFields(out []Field, prefix string, v reflect.Value) []Field {
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		f := v.Field(i)
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Time]() {
			out = appendFields(out, prefix+sf.Name+".", f)
			continue
		}
		out = append(out, Field{Path: prefix + sf.Name, Name: sf.Name, Value: f})
	}
	return out
}

// Get returns the field of v at path.
func Get(t testing.TB, v any, path string) Field {
	t.Helper()
	for _, f := range Fields(v) {
		if f.Path == path {
			return f
		}
	}
	t.Fatalf("fieldtest: %T has no field %s", v, path)
	return Field{}
}

// Filler makes the values: each one it makes differs from every one it
// made before.
type Filler struct{ n int }

// Fill sets every field of the struct *ptr (see Fields) to a new value,
// or to the value given for its path in given, which may be of the field's
// type or, for a pointer field, of the type it points to.
func (fl *Filler) Fill(t testing.TB, ptr any, given map[string]any) {
	t.Helper()
	for _, f := range Fields(ptr) {
		if v, ok := given[f.Path]; ok {
			set(t, f, v)
			continue
		}
		fl.Change(t, f)
	}
}

// Change sets f to a value that is not zero and differs from its own and
// every other made before; a bool is flipped.
func (fl *Filler) Change(t testing.TB, f Field) {
	t.Helper()
	fl.n++
	if !fl.fill(f.Value, fmt.Sprintf("%s-%d", f.Path, fl.n)) {
		t.Fatalf("fieldtest: no value for %s, a %s: teach Filler one", f.Path, f.Value.Type())
	}
}

// base is the first time a Filler gives: times are whole microseconds,
// which PostgreSQL keeps exactly.
var base = time.Date(2031, 1, 2, 3, 4, 5, 6000, time.UTC)

func (fl *Filler) fill(v reflect.Value, text string) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(text)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(fl.n))
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(text))
			return true
		}
		e := reflect.New(v.Type().Elem()).Elem()
		if e.Kind() == reflect.Struct {
			for _, f := range appendFields(nil, "", e) {
				fl.n++
				if !fl.fill(f.Value, fmt.Sprintf("%s.%s-%d", text, f.Path, fl.n)) {
					return false
				}
			}
		} else if !fl.fill(e, text) {
			return false
		}
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return false
		}
		e := reflect.New(v.Type().Elem()).Elem()
		if !fl.fill(e, text) {
			return false
		}
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf("key").Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		if !fl.fill(e.Elem(), text) {
			return false
		}
		v.Set(e)
	case reflect.Struct:
		if v.Type() != reflect.TypeFor[time.Time]() {
			return false
		}
		v.Set(reflect.ValueOf(base.Add(time.Duration(fl.n) * time.Hour)))
	default:
		return false
	}
	return true
}

func set(t testing.TB, f Field, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	switch {
	case rv.Type().ConvertibleTo(f.Value.Type()):
		f.Value.Set(rv.Convert(f.Value.Type()))
	case f.Value.Kind() == reflect.Pointer && rv.Type().ConvertibleTo(f.Value.Type().Elem()):
		p := reflect.New(f.Value.Type().Elem())
		p.Elem().Set(rv.Convert(f.Value.Type().Elem()))
		f.Value.Set(p)
	default:
		t.Fatalf("fieldtest: a %T for %s, a %s", v, f.Path, f.Value.Type())
	}
}

// Equal reports whether a and b hold the same value, times compared as
// instants (a time read from PostgreSQL is in the local zone).
func Equal(a, b reflect.Value) bool {
	for a.Kind() == reflect.Pointer && b.Kind() == reflect.Pointer && !a.IsNil() && !b.IsNil() {
		a, b = a.Elem(), b.Elem()
	}
	if at, ok := a.Interface().(time.Time); ok {
		bt, ok := b.Interface().(time.Time)
		return ok && at.Equal(bt)
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}
