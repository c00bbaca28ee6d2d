package nationalid

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// A person is one person's number in a format, made by a generator: who
// they are (the fields that tell people apart), the canonical form their
// number must have, and the spellings of it that must all read as it.
type person struct {
	who       string
	canonical string
	spellings []string
}

// testNow is the clock of the generated people: no one is born after it.
var testNow = time.Date(2026, time.May, 1, 12, 0, 0, 0, time.UTC)

// generators make a random person of each format, read at testNow.
var generators = map[string]func(r *rand.Rand) person{
	FormatGeneric: genGeneric,
	FormatNorway:  genNorwegian,
	FormatSweden:  genSwedish,
	FormatDenmark: genDanish,
	FormatFinland: genFinnish,
}

// randomDate is a date of birth from the first of January of from to testNow.
func randomDate(r *rand.Rand, from int) time.Time {
	start := time.Date(from, time.January, 1, 0, 0, 0, 0, time.UTC)
	days := int(testNow.Sub(start).Hours() / 24)
	return start.AddDate(0, 0, r.IntN(days))
}

func genGeneric(r *rand.Rand) person {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	n := 1 + r.IntN(20)
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	id := b.String()
	// Case and '-' do not tell people apart in the generic format.
	dashed := id[:n/2] + "-" + id[n/2:]
	return person{who: id, canonical: id, spellings: []string{id, strings.ToLower(id), dashed, "-" + strings.ToLower(dashed)}}
}

func genNorwegian(r *rand.Rand) person {
	for {
		d := randomDate(r, 1854)
		var individual int
		switch y := d.Year(); {
		case y < 1900:
			individual = 500 + r.IntN(250)
		case y < 1940:
			individual = r.IntN(500)
		case y < 2000:
			individual = []int{r.IntN(500), 900 + r.IntN(100)}[r.IntN(2)]
		default:
			individual = 500 + r.IntN(500)
		}
		day, month := d.Day(), int(d.Month())
		kind := r.IntN(3)
		switch kind {
		case 1:
			day += 40 // a D-number
		case 2:
			month += 40 // an H-number
		}
		nine := fmt.Sprintf("%02d%02d%02d%03d", day, month, d.Year()%100, individual)
		k1 := mod11(digits(nine), []int{3, 7, 6, 1, 8, 9, 4, 5, 2})
		if k1 < 0 {
			continue
		}
		k2 := mod11(digits(nine+fmt.Sprint(k1)), []int{5, 4, 3, 2, 7, 6, 5, 4, 3, 2})
		if k2 < 0 {
			continue
		}
		id := fmt.Sprintf("%s%d%d", nine, k1, k2)
		return person{who: id, canonical: id, spellings: []string{id, id[:6] + " " + id[6:]}}
	}
}

// luhnDigit is the Luhn check digit of the nine digits s.
func luhnDigit(s string) int {
	for c := range 10 {
		if luhn(digits(s + fmt.Sprint(c))) {
			return c
		}
	}
	panic("no Luhn digit")
}

func genSwedish(r *rand.Rand) person {
	d := randomDate(r, 1880)
	day := d.Day()
	if r.IntN(4) == 0 {
		day += 60 // a samordningsnummer
	}
	serial := 1 + r.IntN(999)
	ten := fmt.Sprintf("%02d%02d%02d%03d", d.Year()%100, int(d.Month()), day, serial)
	ten += fmt.Sprint(luhnDigit(ten))
	canonical := fmt.Sprintf("%02d", d.Year()/100) + ten
	sign := "-"
	if testNow.Year()-d.Year() >= 100 {
		sign = "+"
	}
	return person{who: canonical, canonical: canonical,
		spellings: []string{canonical, canonical[:8] + "-" + canonical[8:], ten[:6] + sign + ten[6:]}}
}

func genDanish(r *rand.Rand) person {
	for {
		d := randomDate(r, 1858)
		yy := d.Year() % 100
		var sevenths []int
		for s := range 10 {
			if danishCentury(s, yy)+yy == d.Year() {
				sevenths = append(sevenths, s)
			}
		}
		if len(sevenths) == 0 {
			continue
		}
		id := fmt.Sprintf("%02d%02d%02d%d%03d", d.Day(), int(d.Month()), yy, sevenths[r.IntN(len(sevenths))], r.IntN(1000))
		return person{who: id, canonical: id, spellings: []string{id, id[:6] + "-" + id[6:]}}
	}
}

func genFinnish(r *rand.Rand) person {
	d := randomDate(r, 1800)
	var signs []byte
	for s, c := range finnishCenturies {
		if c == d.Year()/100*100 {
			signs = append(signs, s)
		}
	}
	sign := signs[r.IntN(len(signs))]
	body := fmt.Sprintf("%02d%02d%02d", d.Day(), int(d.Month()), d.Year()%100)
	individual := fmt.Sprintf("%03d", 2+r.IntN(998))
	check := finnishCheck[number(digits(body+individual))%31]
	id := body + string(sign) + individual + string(check)
	return person{who: id, canonical: id, spellings: []string{id, strings.ToLower(id)}}
}
