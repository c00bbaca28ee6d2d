package jsondup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFind(t *testing.T) {
	t.Parallel()
	many := func(extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range 40 {
			fmt.Fprintf(&b, `"m%d":%d,`, i, i)
		}
		return b.String() + extra + "}"
	}
	tests := []struct {
		name string
		json string
		want []Duplicate
	}{
		{"none", `{"nationalId":"1","lastName":"Nordmann"}`, nil},
		{"empty", `{}`, nil},
		{"a repeated member", `{"nationalId":"12345678901","nationalId":"98765432109"}`,
			[]Duplicate{{"nationalId", "nationalId", "nationalId"}}},
		{"the same name in two objects", `{"title":{"en":"a"},"purpose":{"en":"b"}}`, nil},
		{"nested", `{"title":{"en":"Loan","nb":"Lån","en":"Loan check"}}`, []Duplicate{{"title.en", "en", "en"}}},
		{"in an array", `{"dataCategories":[{"en":"a","nb":"b"},{"en":"c","nb":"d","nb":"e"}]}`,
			[]Duplicate{{"dataCategories[1].nb", "nb", "nb"}}},
		{"but for case", `{"title":{"en":"Loan","EN":"Scam"}}`, []Duplicate{{"title.EN", "EN", "en"}}},
		{"written with escapes", `{"nationalId":"1","national\u0049d":"9"}`, []Duplicate{{"nationalId", "nationalId", "nationalId"}}},
		{"an escaped quote in a name", `{"a\"b":1,"a\u0022b":2}`, []Duplicate{{`a"b`, `a"b`, `a"b`}}},
		{"folded as encoding/json folds (Kelvin sign)", `{"kind":1,"\u212aind":2}`, []Duplicate{{"\u212aind", "\u212aind", "kind"}}},
		{"names inside strings are not members", `{"a":"{\"a\":1,\"a\":2}","b":["a","a"]}`, nil},
		{"whitespace", "{ \"a\" : 1 ,\n\t\"b\" : [ 1 , 2 ] , \"a\" : null }", []Duplicate{{"a", "a", "a"}}},
		{"every one, in order", `{"a":1,"a":2,"b":{"c":1,"c":2},"a":3}`,
			[]Duplicate{{"a", "a", "a"}, {"b.c", "c", "c"}, {"a", "a", "a"}}},
		{"a large object", many(`"m7":0`), []Duplicate{{"m7", "m7", "m7"}}},
		{"a large object, but for case", many(`"M39":0`), []Duplicate{{"M39", "M39", "m39"}}},
		{"a large object without", many(`"last":0`), nil},
		{"arrays of arrays", `[[{"a":1}],[{"a":1,"a":2}]]`, []Duplicate{{"[1][0].a", "a", "a"}}},
		{"not JSON", `{"a":1,"a"`, []Duplicate{{"a", "a", "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Find([]byte(tt.json)); !slices.Equal(got, tt.want) {
				t.Fatalf("Find(%s) = %q, want %q", tt.json, got, tt.want)
			}
		})
	}
}

// FuzzFind checks Find against a reader of the same JSON built on
// encoding/json's tokens, and that it never fails on text that is not JSON
// or not UTF-8.
func FuzzFind(f *testing.F) {
	for _, seed := range []string{
		`{"nationalId":"1","nationalId":"9"}`, `{"title":{"en":"a","EN":"b"}}`, `[{"a":1},{"a":1,"A":2}]`,
		`{"a\u0041":1,"aa":2}`, `{"x":[1,"y",{"z":null,"z":true}],"y":{}}`, `{"a":1,"a"`, `{`, `"str"`, `[1,2`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := Find(data)
		if !json.Valid(data) || !utf8.Valid(data) {
			return // encoding/json reads invalid UTF-8 as U+FFFD; callers refuse it first
		}
		if want := reference(t, data); !slices.Equal(got, want) {
			t.Fatalf("Find(%s) = %q, reference %q", data, got, want)
		}
	})
}

// reference finds the duplicates of valid JSON with encoding/json's tokens.
func reference(t *testing.T, data []byte) []Duplicate {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out []Duplicate
	join := func(path, name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	var walk func(path string)
	walk = func(path string) {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		switch tok {
		case json.Delim('{'):
			var seen []string
			for dec.More() {
				k, _ := dec.Token()
				name := k.(string)
				if i := slices.IndexFunc(seen, func(s string) bool { return strings.EqualFold(s, name) }); i >= 0 {
					out = append(out, Duplicate{Path: join(path, name), Name: name, Earlier: seen[i]})
				}
				seen = append(seen, name)
				walk(join(path, name))
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				walk(path + "[" + strconv.Itoa(i) + "]")
			}
			_, _ = dec.Token()
		}
	}
	walk("")
	return out
}

func BenchmarkFind(b *testing.B) {
	body := []byte(`{"nationalId":"12345678901","lastName":"Nordmann","redirectUrl":"https://bank.example/consent/done?application=4711",` +
		`"webhookUrl":"https://bank.example/hooks/flowd","referenceName":"Mortgage application 4711"}`)
	b.ReportAllocs()
	for b.Loop() {
		if d := Find(body); d != nil {
			b.Fatal(d)
		}
	}
}
