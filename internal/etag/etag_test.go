package etag

import (
	"testing"

	"github.com/flowd/flowd/internal/apperr"
)

func TestIfMatchComparesStronglyAndTakesListsAndStar(t *testing.T) {
	t.Parallel()
	current := Version(7)
	for _, tt := range []struct {
		name  string
		lines []string
		holds bool
	}{
		{"no header", nil, true},
		{"the current tag", []string{`"v7"`}, true},
		{"a stale tag", []string{`"v6"`}, false},
		{"star", []string{`*`}, true},
		{"a list naming it", []string{`"v5", "v7"`}, true},
		{"a list naming it without spaces", []string{`"v5","v7"`}, true},
		{"a list over two lines", []string{`"v5"`, `"v7"`}, true},
		{"a list not naming it", []string{`"v5", "v6"`}, false},
		{"the weak form of the current tag", []string{`W/"v7"`}, false},
		{"another resource's hash", []string{Of([]byte("x"))}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseIfMatch(tt.lines)
			if err != nil {
				t.Fatalf("ParseIfMatch(%q): %v", tt.lines, err)
			}
			err = m.Check(current)
			if tt.holds && err != nil {
				t.Fatalf("If-Match %q against %s: %v, want it to hold", tt.lines, current, err)
			}
			if !tt.holds && apperr.CodeOf(err) != apperr.PreconditionFailed {
				t.Fatalf("If-Match %q against %s: %v, want precondition-failed", tt.lines, current, err)
			}
		})
	}
}

func TestIfMatchRefusesWhatIsNoEntityTag(t *testing.T) {
	t.Parallel()
	for _, line := range []string{``, `v7`, `"v7`, `"v7" "v8"`, `"v 7"`, `W/v7`, `"v7", v8`, "\"v7\x01\""} {
		_, err := ParseIfMatch([]string{line})
		e, ok := apperr.As(err)
		if !ok || e.Code != apperr.Invalid || len(e.Fields) != 1 || e.Fields[0].Field != "If-Match" {
			t.Errorf("ParseIfMatch(%q) = %v, want an invalid If-Match", line, err)
		}
	}
}

func TestIfNoneMatchComparesWeakly(t *testing.T) {
	t.Parallel()
	current := Version(3)
	for _, tt := range []struct {
		lines []string
		match bool
	}{
		{nil, false},
		{[]string{`"v3"`}, true},
		{[]string{`W/"v3"`}, true},
		{[]string{`"v2", "v3"`}, true},
		{[]string{`*`}, true},
		{[]string{`"v2"`}, false},
		{[]string{`v3`}, false},
	} {
		if got := NoneMatch(tt.lines, current); got != tt.match {
			t.Errorf("NoneMatch(%q, %s) = %v, want %v", tt.lines, current, got, tt.match)
		}
	}
}

func TestTagsAreStrongAndStable(t *testing.T) {
	t.Parallel()
	if got := Version(12); got != `"v12"` {
		t.Fatalf("Version(12) = %s", got)
	}
	a, b := Of([]byte(`{"a":1}`)), Of([]byte(`{"a":2}`))
	if a == b || a != Of([]byte(`{"a":1}`)) {
		t.Fatalf("Of: %s and %s", a, b)
	}
	for _, tag := range []string{a, Version(1), Strong("v1-2-retired")} {
		tags, ok := parseList(tag)
		if !ok || len(tags) != 1 || tags[0] != tag {
			t.Fatalf("%s does not parse as one entity tag: %q", tag, tags)
		}
	}
}
