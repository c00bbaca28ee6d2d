package nationalid

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// FuzzCanonical reads any string in any format: a string that reads as a
// canonical form reads as it again in that form and in the form it is kept
// in, passes Check, and is indexed as its canonical form; one that does
// not is refused without being repeated in the reason. Check, what flowd
// takes as input, takes it too unless it is written with spaces.
func FuzzCanonical(f *testing.F) {
	for _, seed := range []struct {
		format uint8
		id     string
	}{
		{0, "ID-12345"}, {1, "01017010170"}, {1, "41017010083"}, {2, "121212-1212"}, {2, "121212+1212"},
		{2, "201212121212"}, {2, "8112289874"}, {3, "070761-4285"}, {4, "131052-308T"}, {4, "010594y9021"}, {2, "19121212+1212"},
	} {
		f.Add(seed.format, seed.id)
	}
	index := NewBlindIndex(bytes.Repeat([]byte{4}, 32), Format{})
	f.Fuzz(func(t *testing.T, which uint8, id string) {
		format := MustNew(Formats[int(which)%len(Formats)], func() time.Time { return testNow })
		c, err := format.Canonical(id)
		if err != nil {
			if repeats(err.Error(), id) {
				t.Fatalf("%s: the reason repeats the id: %s", format.Name(), err)
			}
			if format.Check(id) == "" {
				t.Fatalf("%s: %q is refused but passes Check", format.Name(), id)
			}
			return
		}
		if again, err := format.Canonical(c); err != nil || again != c {
			t.Fatalf("%s: %q reads as %q, which reads as %q (%v)", format.Name(), id, c, again, err)
		}
		kept, err := format.ToKeep(id)
		if back, ok := format.OfKept(kept, testNow); err != nil || !ok || back != c {
			t.Fatalf("%s: %q kept as %q reads back as %q (%v)", format.Name(), id, kept, back, err)
		}
		if (format.Check(id) == "") == strings.Contains(id, " ") || !bytes.Equal(index.Of(c), index.Of(again(format, c))) {
			t.Fatalf("%s: %q reads as %q but Check, which refuses spaces, or its index disagrees", format.Name(), id, c)
		}
	})
}

// again is c read once more in format, for the index check.
func again(format Format, c string) string {
	out, _ := format.Canonical(c)
	return out
}

// FuzzSpellingsOfOnePerson makes a person of each format from the fuzzed
// seed and checks that every spelling of their number reads as their one
// canonical form, as TestSpellingsOfOnePersonReadAlike does for random
// seeds.
func FuzzSpellingsOfOnePerson(f *testing.F) {
	f.Add(uint8(2), uint64(1))
	f.Add(uint8(1), uint64(42))
	f.Add(uint8(4), uint64(7))
	f.Fuzz(func(t *testing.T, which uint8, seed uint64) {
		name := Formats[int(which)%len(Formats)]
		format := MustNew(name, func() time.Time { return testNow })
		p := generators[name](rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
		for _, s := range p.spellings {
			if c, err := format.Canonical(s); err != nil || c != p.canonical {
				t.Fatalf("%s: %q of %q reads as %q (%v)", name, s, p.canonical, c, err)
			}
		}
	})
}

// repeats reports whether msg repeats id, a string with digits enough to
// be a number rather than a word of the message's own.
func repeats(msg, id string) bool {
	n := 0
	for _, r := range id {
		if r >= '0' && r <= '9' {
			n++
		}
	}
	return n >= 4 && strings.Contains(msg, id)
}
