package nationalid

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"
	"time"
)

// withMod11 is the nine digits of a Norwegian number with its two check
// digits, whatever else is wrong with it.
func withMod11(nine string) string {
	k1 := mod11(digits(nine), []int{3, 7, 6, 1, 8, 9, 4, 5, 2})
	k2 := mod11(digits(nine+string(rune('0'+k1))), []int{5, 4, 3, 2, 7, 6, 5, 4, 3, 2})
	if k1 < 0 || k2 < 0 {
		panic("no check digits for " + nine)
	}
	return nine + string(rune('0'+k1)) + string(rune('0'+k2))
}

// withLuhn is a Swedish YYMMDD±NNN with its Luhn digit.
func withLuhn(s string) string {
	return s + string(rune('0'+luhnDigit(s[:6]+s[7:])))
}

// withMod31 is a Finnish DDMMYYCZZZ with its check character.
func withMod31(s string) string {
	return s + string(finnishCheck[number(digits(s[:6]+s[7:10]))%31])
}

// formatAt is the format name read at at.
func formatAt(t testing.TB, name string, at time.Time) Format {
	t.Helper()
	f, err := New(name, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkTable checks ids of one format: each of valid reads as its
// canonical form, each of invalid is refused with a message that does not
// repeat it.
func checkTable(t *testing.T, f Format, valid map[string]string, invalid []string) {
	t.Helper()
	for id, want := range valid {
		if got, err := f.Canonical(id); err != nil || got != want {
			t.Errorf("%s %q: %q %v, want %q", f.Name(), id, got, err, want)
		}
	}
	for id := range valid {
		if msg := f.Check(id); msg != "" && !strings.Contains(id, " ") {
			t.Errorf("%s %q: Check says %s", f.Name(), id, msg)
		} else if msg == "" && strings.Contains(id, " ") {
			t.Errorf("%s %q, with a space, passes Check", f.Name(), id)
		}
	}
	for _, id := range invalid {
		if f.Check(id) == "" {
			t.Errorf("%s %q passes Check", f.Name(), id)
		}
		got, err := f.Canonical(id)
		if err == nil {
			t.Errorf("%s %q passed as %q", f.Name(), id, got)
			continue
		}
		if len(id) > 3 && strings.Contains(err.Error(), id) {
			t.Errorf("%s: the message repeats the id: %s", f.Name(), err)
		}
	}
}

func TestNorwegianNationalIDs(t *testing.T) {
	t.Parallel()
	checkTable(t, formatAt(t, FormatNorway, testNow), map[string]string{
		"01017010170":          "01017010170", // fødselsnummer, 1970
		"010170 10170":         "01017010170",
		"31129910065":          "31129910065",
		"15080510044":          "15080510044",          // 1905
		"41017010083":          "41017010083",          // D-number: day + 40
		withMod11("014170100"): withMod11("014170100"), // H-number: month + 40
	}, []string{
		"01017010171",          // second check digit wrong
		"01017010160",          // first check digit wrong
		"0101701017",           // 10 digits
		"010170101700",         // 12 digits
		"0101701017a",          // a letter
		"01137010170",          // month 13
		"00017010170",          // day 0
		"32017010170",          // day 32
		"010170-10170",         // separator
		withMod11("300270101"), // 30 February
		withMod11("010145750"), // individual number 750 in 1945: never allotted
		withMod11("010130500"), // individual number 500 with year 30: 2030 is to come
		withMod11("414170100"), // both a D- and an H-number
		"",
	})
}

func TestSwedishNationalIDs(t *testing.T) {
	t.Parallel()
	f := formatAt(t, FormatSweden, testNow)
	checkTable(t, f, map[string]string{
		"811228-9874":          "198112289874", // 10 digits with '-'
		"198112289874":         "198112289874", // 12 digits
		"19811228-9874":        "198112289874", // 12 digits with '-'
		"121212-1212":          "201212121212", // born 2012: under 100
		"121212+1212":          "191212121212", // born 1912: 100 or older
		"201212121212":         "201212121212",
		"19121212+1212":        "191212121212",
		"701063-2342":          "197010632342",                                             // samordningsnummer: day + 60
		withLuhn("260101+000"): "19" + strings.ReplaceAll(withLuhn("260101+000"), "+", ""), // turns 100 this year: '+' from the year of the birthday
	}, []string{
		"8112289874",           // 10 digits without sign: no century
		"811228-9873",          // Luhn digit wrong
		"811328-9874",          // month 13 (and the digit no longer matches)
		"811200-9870",          // day 0
		"81122-89874",          // separator in the wrong place
		"811228_9874",          // another separator
		"17811228-9874",        // century 17
		"81122898741",          // 11 digits
		"20121212+1212",        // '+' for someone born in 2012
		withLuhn("260601-000"), // born 1 June 2026: to come
		"abcdefghij",
		"",
	})
	// The same spelling names another person a century on: '-' becomes '+'
	// in the year of the 100th birthday.
	later := formatAt(t, FormatSweden, time.Date(2113, time.March, 1, 0, 0, 0, 0, time.UTC))
	if got, _ := later.Canonical("121212-1212"); got != "211212121212" {
		t.Errorf("121212-1212 read in 2113: %q", got)
	}
	if got, _ := later.Canonical("121212+1212"); got != "201212121212" {
		t.Errorf("121212+1212 read in 2113: %q", got)
	}
}

func TestDanishNationalIDs(t *testing.T) {
	t.Parallel()
	checkTable(t, formatAt(t, FormatDenmark, testNow), map[string]string{
		"070761-4285": "0707614285",
		"0707614285":  "0707614285",
		"010110-4000": "0101104000",
		"010160-5000": "0101605000",
		"290200-4000": "2902004000", // seventh 4, year 00: 2000, a leap year
	}, []string{
		"290200-1000", // seventh 1, year 00: 1900, no 29 February
		"010130-5000", // seventh 5, year 30: 2030, to come
		"320161-4285", // day 32
		"070761_4285",
		"07076142851",
		"",
	})
}

func TestFinnishNationalIDs(t *testing.T) {
	t.Parallel()
	checkTable(t, formatAt(t, FormatFinland, testNow), map[string]string{
		"131052-308T":           "131052-308T", // 1952
		"131052-308t":           "131052-308T",
		"131052Y308T":           "131052Y308T", // a 2023 sign of the 1900s: another person
		"010594Y9032":           "010594Y9032",
		"010594Y9021":           "010594Y9021",
		withMod31("020300A011"): withMod31("020300A011"), // 2000
		withMod31("020300E011"): withMod31("020300E011"), // a 2023 sign of the 2000s
		withMod31("010101+002"): withMod31("010101+002"), // 1801
	}, []string{
		"131052-308U",           // check character wrong
		"131052Z308T",           // no century sign
		withMod31("131052-000"), // individual number 000
		withMod31("310252-308"), // 31 February
		withMod31("010130A002"), // 2030, to come
		"131052-308",
		"",
	})
}

func TestGenericNationalIDs(t *testing.T) {
	t.Parallel()
	checkTable(t, Format{}, map[string]string{
		"a": "A", "ID-12345": "ID12345", "id12345": "ID12345", strings.Repeat("Z9", 32): strings.Repeat("Z9", 32),
		"12 34": "1234", "123456 78901": "12345678901",
	}, []string{"", "---", " ", strings.Repeat("1", 65), "æøå", "1_2", "1.2", "1+2", "1\t2"})
}

// TestSpellingsOfOnePersonReadAlike is the property of every format: any
// two spellings of one person's number read as one canonical form, which
// a third reading does not change, which the person's number is kept in
// and read back as, and by which the blind index finds them.
func TestSpellingsOfOnePersonReadAlike(t *testing.T) {
	t.Parallel()
	index := NewBlindIndex(bytes.Repeat([]byte{1}, 32), Format{})
	for name, gen := range generators {
		f := formatAt(t, name, testNow)
		prop := func(seed uint64) bool {
			p := gen(rand.New(rand.NewPCG(seed, seed>>1)))
			for _, s := range p.spellings {
				c, err := f.Canonical(s)
				if err != nil || c != p.canonical {
					t.Logf("%s: %q of %q reads as %q (%v)", name, s, p.canonical, c, err)
					return false
				}
				if again, err := f.Canonical(c); err != nil || again != c {
					t.Logf("%s: the canonical %q reads as %q (%v)", name, c, again, err)
					return false
				}
				kept, err := f.ToKeep(s)
				if back, ok := f.OfKept(kept, testNow); err != nil || !ok || back != c {
					t.Logf("%s: %q kept as %q reads back as %q", name, s, kept, back)
					return false
				}
				if !bytes.Equal(index.Of(c), index.Of(p.canonical)) {
					return false
				}
			}
			return true
		}
		if err := quick.Check(prop, &quick.Config{MaxCount: 3000}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestTwoPeopleNeverReadAlike is the other property: the numbers of two
// people (who differ in what tells people apart in their format) never
// read as one canonical form, nor index alike, in any spelling; a Swedish
// number of someone born a century before or after, spelt the same in ten
// digits but for its sign, is another person's.
func TestTwoPeopleNeverReadAlike(t *testing.T) {
	t.Parallel()
	index := NewBlindIndex(bytes.Repeat([]byte{1}, 32), Format{})
	for name, gen := range generators {
		f := formatAt(t, name, testNow)
		prop := func(a, b uint64) bool {
			p, q := gen(rand.New(rand.NewPCG(a, 1))), gen(rand.New(rand.NewPCG(b, 2)))
			if p.who == q.who {
				return true
			}
			for _, s := range p.spellings {
				for _, u := range q.spellings {
					cs, _ := f.Canonical(s)
					cu, _ := f.Canonical(u)
					if cs == cu || bytes.Equal(index.Of(cs), index.Of(cu)) {
						t.Logf("%s: %q and %q, two people, read alike as %q", name, s, u, cs)
						return false
					}
				}
			}
			return true
		}
		if err := quick.Check(prop, &quick.Config{MaxCount: 2000}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	f := formatAt(t, FormatSweden, testNow)
	century := func(seed uint64) bool {
		p := genSwedish(rand.New(rand.NewPCG(seed, 3)))
		ten := p.canonical[2:8] + "-" + p.canonical[8:]
		if p.spellings[2][6] == '-' {
			ten = p.canonical[2:8] + "+" + p.canonical[8:]
		}
		other, err := f.Canonical(ten)
		return err != nil || other != p.canonical
	}
	if err := quick.Check(century, &quick.Config{MaxCount: 2000}); err != nil {
		t.Errorf("a Swedish number with the other sign: %v", err)
	}
}

// TestKeptIdsOfEarlierVersions: a Swedish 10-digit number kept without its
// sign before flowd had canonical forms reads, as of when it was kept, as
// written with '-'; an id of no valid form reads as it was compared then.
func TestKeptIdsOfEarlierVersions(t *testing.T) {
	t.Parallel()
	f := formatAt(t, FormatSweden, testNow)
	for _, c := range []struct {
		kept string
		at   time.Time
		want string
		ok   bool
	}{
		{"1212121212", testNow, "201212121212", true},
		{"121212+1212", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), "191212121212", true},
		{"1212121212", time.Date(2013, 1, 1, 0, 0, 0, 0, time.UTC), "201212121212", true},
		{"12-34", testNow, "1234", false},
	} {
		if got, ok := f.OfKept(c.kept, c.at); got != c.want || ok != c.ok {
			t.Errorf("%q kept at %s: %q %v, want %q %v", c.kept, c.at.Format(time.DateOnly), got, ok, c.want, c.ok)
		}
	}
	if got := f.LegacyForms("201212121212"); len(got) != 1 || got[0] != "1212121212" {
		t.Errorf("the legacy forms of a Swedish number: %q", got)
	}
	if got := formatAt(t, FormatNorway, testNow).LegacyForms("01017010170"); got != nil {
		t.Errorf("a Norwegian number has legacy forms: %q", got)
	}
}

// TestTheIndexVersionFollowsTheReading: the blind index's version changes
// with the key and where a format's canonical forms changed (Swedish), not
// elsewhere, so that only rows indexed under an old reading are indexed
// again.
func TestTheIndexVersionFollowsTheReading(t *testing.T) {
	t.Parallel()
	kek := bytes.Repeat([]byte{1}, 32)
	generic, norway := NewBlindIndex(kek, Format{}).Version(), NewBlindIndex(kek, MustNew(FormatNorway, nil)).Version()
	sweden := NewBlindIndex(kek, MustNew(FormatSweden, nil)).Version()
	other := NewBlindIndex(bytes.Repeat([]byte{2}, 32), Format{}).Version()
	if generic != norway || sweden == generic || other == generic {
		t.Errorf("versions: generic %s, no %s, se %s, another key %s", generic, norway, sweden, other)
	}
}
