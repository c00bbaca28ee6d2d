// Package etag holds flowd's entity tags (RFC 9110 section 8.8.3) and the
// conditions requests make on them. A resource that can be changed has a
// version that grows with every change of what the API shows of it, and its
// tag names that version; a resource that cannot be changed through the API
// is tagged by a hash of its body. A write that takes an If-Match condition
// checks it in the module that makes the change, under the row lock the
// write holds, so that no other write comes between the check and the change.
package etag

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/flowd/flowd/internal/apperr"
)

// Strong returns opaque, which must hold no double quote, as a strong
// entity tag: in double quotes.
func Strong(opaque string) string { return `"` + opaque + `"` }

// Version returns the strong entity tag of a resource's version n: "v<n>".
func Version(n int) string { return `"v` + strconv.Itoa(n) + `"` }

// Of returns the strong entity tag of a representation without a version:
// a hash of its bytes, so that it changes whenever they do and is the same
// on every instance.
func Of(body []byte) string {
	sum := sha256.Sum256(body)
	return Strong(base64.RawURLEncoding.EncodeToString(sum[:16]))
}

// IfMatch is the condition of a write's If-Match header: the entity tags of
// which the resource's current one must be one. A write with a condition
// that does not hold changes nothing.
type IfMatch struct {
	tags []string // each in quotes; none: any state holds
}

// Any is no condition: every state of an existing resource meets it, as it
// meets "If-Match: *". A missing resource is not found either way.
var Any = IfMatch{}

// ParseIfMatch reads the If-Match field lines of a request: "*", or a
// comma-separated list of entity tags. No line is Any. A line of any other
// form is an apperr Invalid error naming If-Match.
func ParseIfMatch(lines []string) (IfMatch, error) {
	var m IfMatch
	star := false
	for _, line := range lines {
		tags, ok := parseList(line)
		if !ok {
			return Any, apperr.InvalidFields([]apperr.FieldError{{Field: "If-Match",
				Message: `must be "*" or a list of entity tags in double quotes, such as "v7", as the ETag header gives them`}})
		}
		for _, t := range tags {
			if t == "*" {
				star = true
			} else {
				m.tags = append(m.tags, t)
			}
		}
	}
	if star {
		return Any, nil
	}
	return m, nil
}

// Check returns nil when the condition holds for a resource whose entity
// tag is current, a strong one, and otherwise an apperr PreconditionFailed
// error. Tags compare strongly (RFC 9110 section 8.8.3.2): a weak tag never
// matches.
func (m IfMatch) Check(current string) error {
	if len(m.tags) == 0 {
		return nil
	}
	for _, t := range m.tags {
		if t == current {
			return nil
		}
	}
	return apperr.New(apperr.PreconditionFailed,
		"The resource has changed since the version If-Match names: read it again and decide anew.")
}

// NoneMatch reports whether a GET's If-None-Match field lines name current
// or are "*", so that the client's copy is current and the answer is 304 Not
// Modified. Tags compare weakly (a W/ prefix is ignored); a line that is no
// list of entity tags names nothing.
func NoneMatch(lines []string, current string) bool {
	current = strings.TrimPrefix(current, "W/")
	for _, line := range lines {
		tags, ok := parseList(line)
		if !ok {
			continue
		}
		for _, t := range tags {
			if t == "*" || strings.TrimPrefix(t, "W/") == current {
				return true
			}
		}
	}
	return false
}

// parseList splits a field line of If-Match or If-None-Match into its
// members, "*" or entity tags as sent (W/ prefix and quotes kept). It reports
// false when the line is neither (RFC 9110 sections 13.1.1 and 8.8.3).
func parseList(line string) ([]string, bool) {
	var out []string
	s := line
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return out, len(out) > 0
		}
		var tag string
		switch {
		case s[0] == '*':
			tag, s = "*", s[1:]
		case strings.HasPrefix(s, `W/"`), s[0] == '"':
			start := 0
			if s[0] == 'W' {
				start = 2
			}
			end := strings.IndexByte(s[start+1:], '"')
			if end < 0 {
				return nil, false
			}
			end += start + 2
			tag, s = s[:end], s[end:]
			for i := start + 1; i < end-1; i++ {
				if c := tag[i]; c < 0x21 || c == 0x7f {
					return nil, false // etagc is visible characters and obs-text
				}
			}
		default:
			return nil, false
		}
		out = append(out, tag)
		s = strings.TrimLeft(s, " \t")
		if s != "" && s[0] != ',' {
			return nil, false
		}
	}
}
