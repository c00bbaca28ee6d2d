package fieldtest

import (
	"slices"
	"testing"
)

// Reaches checks that every field of T reaches what render makes of it: for
// each field (see Fields), a copy of one of bases with only that field
// changed renders differently from that base. A field some state hides (a
// link shown only while a flow is active) needs a base in that state.
// Fields named in skip, each with why the rendering leaves it out, are not
// checked; a skipped field T does not have fails, so that the list cannot
// go stale.
func Reaches[T any](t *testing.T, bases []T, render func(T) string, skip map[string]string) {
	t.Helper()
	if len(bases) == 0 {
		t.Fatal("fieldtest: Reaches needs a base")
	}
	// Values far from a Filler's first ones, so that a change never lands
	// on the value a base was filled with.
	fl := Filler{n: 1 << 20}
	var paths []string
	for _, f := range Fields(&bases[0]) {
		paths = append(paths, f.Path)
	}
	for path := range skip {
		if !slices.Contains(paths, path) {
			t.Errorf("fieldtest: %T has no field %s, which skip names", bases[0], path)
		}
	}
	for _, path := range paths {
		if _, ok := skip[path]; ok {
			continue
		}
		reached := false
		for _, base := range bases {
			changed := base
			fl.Change(t, Get(t, &changed, path))
			if render(changed) != render(base) {
				reached = true
				break
			}
		}
		if !reached {
			t.Errorf("%T.%s does not reach the rendering: show it, or say in skip why not", bases[0], path)
		}
	}
}
