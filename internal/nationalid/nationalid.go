// Package nationalid checks national identity numbers in the formats
// flowd accepts, turns every spelling of one person's number into its one
// canonical form, by which flowd tells people apart, and makes the blind
// index by which a person's flows are found without opening them.
package nationalid

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// National id formats, chosen by FLOWD_NATIONAL_ID_FORMAT.
const (
	FormatGeneric = "generic" // 1–64 letters, digits or '-'
	FormatNorway  = "no"      // fødselsnummer, D- or H-number, both mod-11 check digits
	FormatSweden  = "se"      // personnummer or samordningsnummer, Luhn check digit
	FormatDenmark = "dk"      // CPR-nummer, the century from its seventh digit
	FormatFinland = "fi"      // henkilötunnus, its century sign and check character
)

// Formats lists every format, the default first.
var Formats = []string{FormatGeneric, FormatNorway, FormatSweden, FormatDenmark, FormatFinland}

// Format is one national id format with the clock that a Swedish 10-digit
// number's '-' or '+' is read against. The zero Format is FormatGeneric on
// the system clock.
type Format struct {
	name string
	now  func() time.Time
}

// New returns the format name, reading Swedish numbers against now (the
// system clock when nil).
func New(name string, now func() time.Time) (Format, error) {
	for _, f := range Formats {
		if f == name {
			return Format{name: name, now: now}, nil
		}
	}
	return Format{}, fmt.Errorf("nationalid: no format %q (want one of %s)", name, strings.Join(Formats, ", "))
}

// MustNew is New for a name known to be one of Formats, such as a setting
// already checked; it panics on any other.
func MustNew(name string, now func() time.Time) Format {
	f, err := New(name, now)
	if err != nil {
		panic(err)
	}
	return f
}

// Name is the format's name, one of Formats.
func (f Format) Name() string {
	if f.name == "" {
		return FormatGeneric
	}
	return f.name
}

func (f Format) clock() time.Time {
	if f.now == nil {
		return time.Now()
	}
	return f.now()
}

// Error says why a string is not a national id of a format; it never
// repeats the string.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

func invalid(format string, args ...any) error { return &Error{Reason: fmt.Sprintf(format, args...)} }

// Check reports what is wrong with id as input to flowd (a flow's or an
// erasure's national id), or "" when it is a valid number of the format
// now, written without spaces.
func (f Format) Check(id string) string {
	if _, err := f.read(id, f.clock()); err != nil {
		return err.Error()
	}
	return ""
}

// Canonical returns the one form that every spelling of the person's number
// id has, now: two spellings of one person's number give the same form,
// and the numbers of two people never do. An *Error says why id is none:
// it has no valid date, check digit or century, or cannot be placed.
// Spaces are no part of any number, and are ignored, as an eID or a
// person may write them. The forms: generic,
// upper case without '-'; no, the 11 digits; se, the 12 digits with the
// century; dk, the 10 digits; fi, the 11 characters in upper case.
func (f Format) Canonical(id string) (string, error) { return f.CanonicalAt(id, f.clock()) }

// CanonicalAt is Canonical as read at at: the date a Swedish 10-digit
// number's '-' (under 100 years old) or '+' (from the year of the 100th
// birthday) speaks of, and after which no one is born yet.
func (f Format) CanonicalAt(id string, at time.Time) (string, error) {
	return f.read(strings.ReplaceAll(id, " ", ""), at)
}

// read reads id as written.
func (f Format) read(id string, at time.Time) (string, error) {
	switch f.Name() {
	case FormatNorway:
		return norwegian(id, at)
	case FormatSweden:
		return swedish(id, at)
	case FormatDenmark:
		return danish(id, at)
	case FormatFinland:
		return finnish(id, at)
	default:
		return generic(id)
	}
}

// ToKeep is what a flow keeps of id, a valid number: the id as written,
// unless its reading depends on the date it is read at (a Swedish 10-digit
// number, whose '-' turns into '+' the year its person turns 100), which is
// kept in its canonical form. An *Error as Canonical says.
func (f Format) ToKeep(id string) (string, error) {
	c, err := f.Canonical(id)
	if err != nil || f.Name() == FormatSweden {
		return c, err
	}
	return id, nil
}

// OfKept is the canonical form of kept, a national id flowd kept at at,
// as read then; a Swedish 10-digit number kept without its sign, which
// flowd took before it kept canonical forms, is read as written with '-'.
// When kept is no valid number of the format (a row of another format, or
// of an earlier, laxer check), ok is false and the form is the one flowd
// compared ids in before (Legacy), so that the row is still found as it
// was.
func (f Format) OfKept(kept string, at time.Time) (canonical string, ok bool) {
	c, err := f.CanonicalAt(kept, at)
	if err != nil && f.Name() == FormatSweden && len(kept) == 10 && allDigits(kept) {
		c, err = f.CanonicalAt(kept[:6]+"-"+kept[6:], at)
	}
	if err != nil {
		return Legacy(kept), false
	}
	return c, true
}

// Rekeep is what a flow that kept kept at at keeps when its personal data
// is sealed again: what ToKeep would have kept then, so that a Swedish
// 10-digit number kept before flowd had canonical forms is kept in its
// canonical form from then on, and any other id as it was written.
func (f Format) Rekeep(kept string, at time.Time) string {
	if c, ok := f.OfKept(kept, at); ok && f.Name() == FormatSweden {
		return c
	}
	return kept
}

// LegacyForms are the forms, besides canonical itself, under which flowd
// may have hashed or indexed the person of canonical before it had
// canonical forms: a Swedish number without its century, as its 10-digit
// spellings were compared then. Such a form may name two people, born a
// century apart, so whatever is found under it is confirmed by its
// canonical form before it is taken for the person's.
func (f Format) LegacyForms(canonical string) []string {
	if f.Name() == FormatSweden && len(canonical) == 12 {
		return []string{canonical[2:]}
	}
	return nil
}

// Legacy is the form flowd compared national ids in before it had
// canonical forms: without spaces, '-' and '+', in upper case. It tells
// apart fewer people than Canonical (a Swedish 10-digit number's century
// is lost), and serves only to find what was kept under it: the keyed
// hashes of tombstones and receipt subjects made before.
func Legacy(id string) string {
	return strings.ToUpper(strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' || r == '+' {
			return -1
		}
		return r
	}, id))
}

// errNoDate is the reason of a number whose date is not a date.
var errNoDate = errors.New("the date is not valid")

// birthDate returns the date of year, month and day, or errNoDate when
// it is no date; a date after at (with a day's grace for the time zones)
// is no one's birth date yet.
func birthDate(year, month, day int, at time.Time) (time.Time, error) {
	d := time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC)
	if month < 1 || month > 12 || day < 1 || d.Day() != day || int(d.Month()) != month {
		return time.Time{}, errNoDate
	}
	if d.After(at.UTC().Add(24 * time.Hour)) {
		return time.Time{}, errors.New("the date of birth is in the future")
	}
	return d, nil
}

func generic(id string) (string, error) {
	const msg = "must be 1 to 64 letters, digits or '-', with at least one letter or digit"
	if id == "" || len(id) > 64 {
		return "", invalid(msg)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return "", invalid(msg)
		}
	}
	c := Legacy(id)
	if c == "" {
		return "", invalid(msg)
	}
	return c, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func digits(s string) []int {
	d := make([]int, len(s))
	for i := range len(s) {
		d[i] = int(s[i] - '0')
	}
	return d
}

// number is the value of the decimal digits d.
func number(d []int) int {
	n := 0
	for _, v := range d {
		n = n*10 + v
	}
	return n
}
