// Package jsondup finds the members of a JSON text whose name an earlier
// member of the same object has. encoding/json keeps the last of them, and
// matches names to struct fields without regard to case, while a proxy or a
// firewall in front of flowd may read the first: a body that says two things
// must be refused rather than read one way.
package jsondup

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Duplicate is a member whose name an earlier member of its object has,
// exactly or but for case.
type Duplicate struct {
	// Path names the member as flowd names fields: nationalId, title.en,
	// dataCategories[2].nb.
	Path string
	// Name is the member's name and Earlier the earlier member's; they
	// differ only in case when they differ at all.
	Name, Earlier string
}

// maxDepth bounds the nesting Find follows, as encoding/json bounds it.
const maxDepth = 10000

// largeObject is the number of members past which an object's names are
// kept in a map rather than compared pair by pair.
const largeObject = 32

// Find returns the duplicate members of data, a valid JSON text in UTF-8
// (encoding/json reads invalid UTF-8 as U+FFFD, so that names distinct here
// may collide there: check data with utf8.Valid first), in the order they
// appear. It reads data once and allocates nothing unless it finds a
// duplicate, a member name holds escapes or an object is large; on text that
// is not valid JSON it stops early and never fails.
func Find(data []byte) []Duplicate {
	s := scanners.Get().(*scanner)
	s.data, s.i, s.path, s.names = data, 0, s.path[:0], s.names[:0]
	s.value()
	found := s.found
	// Names and paths point into data: drop them, and the room of a large body.
	clear(s.names[:cap(s.names)])
	clear(s.path[:cap(s.path)])
	s.data, s.found = nil, nil
	if cap(s.names) > 1024 || cap(s.path) > 1024 {
		s.names, s.path = nil, nil
	}
	scanners.Put(s)
	return found
}

// scanners keep their room for paths and names from one body to the next,
// so that reading a body allocates nothing.
var scanners = sync.Pool{New: func() any { return new(scanner) }}

type scanner struct {
	data  []byte
	i     int
	path  []segment
	names [][]byte // the member names of the open objects, outermost first
	found []Duplicate
}

// segment is one step of a path: a member's name, or an array's index.
type segment struct {
	name  []byte
	index int // -1 for a member
}

func (s *scanner) value() {
	s.skipSpace()
	if s.i >= len(s.data) || len(s.path) > maxDepth {
		return
	}
	switch s.data[s.i] {
	case '{':
		s.i++
		start := len(s.names)
		s.members(start)
		s.names = s.names[:start]
	case '[':
		s.array()
	case '"':
		s.str()
	default: // a number, true, false or null
		for s.i < len(s.data) && strings.IndexByte(" \t\r\n,:]}", s.data[s.i]) < 0 {
			s.i++
		}
	}
}

// members reads the members of an object up to its closing brace, noting
// each name in s.names from start on. An object nested in a member leaves
// s.names as it found it.
func (s *scanner) members(start int) {
	var folded map[string]string // name by folded name, for a large object
	for s.i < len(s.data) {
		s.skipSpace()
		if s.i >= len(s.data) {
			return
		}
		switch s.data[s.i] {
		case '}':
			s.i++
			return
		case ',':
			s.i++
			continue
		case '"':
		default:
			return // not JSON
		}
		name := s.str()
		if prev, ok := earlier(s.names[start:], &folded, name); ok {
			s.found = append(s.found, Duplicate{Path: s.pathTo(name), Name: string(name), Earlier: string(prev)})
		}
		s.names = append(s.names, name)
		s.skipSpace()
		if s.i < len(s.data) && s.data[s.i] == ':' {
			s.i++
		}
		s.path = append(s.path, segment{name: name, index: -1})
		before := s.i
		s.value()
		s.path = s.path[:len(s.path)-1]
		if s.i == before {
			return // no value: not JSON
		}
	}
}

// earlier returns the name of seen that name repeats, exactly or but for
// case. Past largeObject names it keeps them in folded instead of comparing
// each pair.
func earlier(seen [][]byte, folded *map[string]string, name []byte) ([]byte, bool) {
	if len(seen) < largeObject {
		for _, prev := range seen {
			if bytes.EqualFold(prev, name) {
				return prev, true
			}
		}
		return nil, false
	}
	if *folded == nil {
		*folded = make(map[string]string, 2*len(seen))
		for _, prev := range seen {
			if _, ok := (*folded)[fold(prev)]; !ok {
				(*folded)[fold(prev)] = string(prev)
			}
		}
	}
	key := fold(name)
	if prev, ok := (*folded)[key]; ok {
		return []byte(prev), true
	}
	(*folded)[key] = string(name)
	return nil, false
}

func (s *scanner) array() {
	s.i++ // [
	for n := 0; s.i < len(s.data); {
		s.skipSpace()
		if s.i >= len(s.data) {
			return
		}
		switch s.data[s.i] {
		case ']':
			s.i++
			return
		case ',':
			s.i++
			continue
		}
		s.path = append(s.path, segment{index: n})
		n++
		start := s.i
		s.value()
		s.path = s.path[:len(s.path)-1]
		if s.i == start {
			return // no value: not JSON
		}
	}
}

// str reads a string and returns its value: the bytes between the quotes
// themselves unless it holds escapes.
func (s *scanner) str() []byte {
	start := s.i // the opening quote
	s.i++
	end := bytes.IndexByte(s.data[s.i:], '"')
	if end < 0 {
		s.i = len(s.data)
		return nil
	}
	if bytes.IndexByte(s.data[s.i:s.i+end], '\\') < 0 {
		s.i += end + 1
		return s.data[start+1 : s.i-1]
	}
	// Escapes: find the closing quote, then let encoding/json read them.
	for s.i < len(s.data) && s.data[s.i] != '"' {
		if s.data[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	if s.i >= len(s.data) {
		return nil
	}
	s.i++
	var v string
	if json.Unmarshal(s.data[start:s.i], &v) != nil {
		return nil
	}
	return []byte(v)
}

func (s *scanner) skipSpace() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// pathTo names the member name of the innermost open object.
func (s *scanner) pathTo(name []byte) string {
	var b strings.Builder
	for _, seg := range append(s.path, segment{name: name, index: -1}) {
		if seg.index >= 0 {
			b.WriteString("[" + strconv.Itoa(seg.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(seg.name)
	}
	return b.String()
}

// fold is name folded as encoding/json folds member names: fold(a) ==
// fold(b) exactly when bytes.EqualFold(a, b).
func fold(name []byte) string {
	out := make([]byte, 0, len(name))
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return string(out)
}

// foldRune is the smallest rune of r's fold set.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
