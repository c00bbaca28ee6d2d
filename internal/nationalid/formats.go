package nationalid

import (
	"strconv"
	"strings"
	"time"
)

// norwegian reads an 11-digit fødselsnummer: DDMMYY, a three-digit
// individual number, whose range with YY gives the century, and two mod-11
// check digits. A D-number has 40 added to its day, an H-number 40 to its
// month.
func norwegian(id string, at time.Time) (string, error) {
	const msg = "must be a Norwegian national identity number of 11 digits"
	s := id
	if len(s) != 11 || !allDigits(s) {
		return "", invalid(msg)
	}
	d := digits(s)
	day, month, yy, individual := number(d[0:2]), number(d[2:4]), number(d[4:6]), number(d[6:9])
	dNumber, hNumber := day > 40, month > 40
	if dNumber {
		day -= 40
	}
	if hNumber {
		month -= 40
	}
	century := norwegianCentury(individual, yy)
	if century == 0 || dNumber && hNumber {
		return "", invalid("%s: its individual number does not fit its year of birth", msg)
	}
	if _, err := birthDate(century+yy, month, day, at); err != nil {
		return "", invalid("%s: %v", msg, err)
	}
	k1 := mod11(d[:9], []int{3, 7, 6, 1, 8, 9, 4, 5, 2})
	k2 := mod11(d[:10], []int{5, 4, 3, 2, 7, 6, 5, 4, 3, 2})
	if k1 != d[9] || k2 != d[10] {
		return "", invalid("%s: the check digits do not match", msg)
	}
	return s, nil
}

// norwegianCentury is the century of a Norwegian number by its individual
// number and two-digit year, as the tax administration allots them, or 0
// for a pair it never allots.
func norwegianCentury(individual, yy int) int {
	switch {
	case individual <= 499:
		return 1900
	case yy <= 39:
		return 2000 // 500–999
	case individual >= 900:
		return 1900 // 900–999, 1940–1999
	case individual <= 749 && yy >= 54:
		return 1800 // 500–749, 1854–1899
	}
	return 0
}

// mod11 returns the check digit over d with weights w, or -1 when none exists
// (such numbers are never issued).
func mod11(d, w []int) int {
	sum := 0
	for i := range w {
		sum += d[i] * w[i]
	}
	k := 11 - sum%11
	switch k {
	case 11:
		return 0
	case 10:
		return -1
	}
	return k
}

// swedish reads a personnummer or samordningsnummer (60 added to its day):
// YYYYMMDDNNNC, with an optional '-' before the last four digits, or
// YYMMDD-NNNC for a person under 100 years old and YYMMDD+NNNC from the
// year they turn 100, read against at; C is the Luhn digit over the last
// ten. Its canonical form is the 12 digits. A 10-digit number without its
// sign cannot be placed in a century, and is refused.
func swedish(id string, at time.Time) (string, error) {
	const msg = "must be a Swedish personal identity number: YYYYMMDDNNNN, or YYMMDD-NNNN (under 100 years old) or YYMMDD+NNNN (100 or older)"
	s, sign := id, byte(0)
	if n := len(s); n == 11 || n == 13 {
		if c := s[n-5]; c == '-' || c == '+' {
			s, sign = s[:n-5]+s[n-4:], c
		}
	}
	if (len(s) != 10 && len(s) != 12) || !allDigits(s) {
		return "", invalid(msg)
	}
	thisYear := at.Year()
	if len(s) == 10 {
		yy := number(digits(s[:2]))
		// The birth year ends in yy and lies within the century the sign
		// names: the last hundred years for '-', the hundred before for '+'.
		var year int
		switch sign {
		case '-':
			year = thisYear - (thisYear-yy)%100
		case '+':
			year = thisYear - 100 - (thisYear-100-yy)%100
		default:
			return "", invalid("%s: without its '-' or '+', a 10-digit number cannot be placed in a century", msg)
		}
		s = strconv.Itoa(year/100) + s
	} else if century := s[:2]; century != "18" && century != "19" && century != "20" {
		return "", invalid("%s: the year is not valid", msg)
	}
	d := digits(s)
	year, month, day := number(d[0:4]), number(d[4:6]), number(d[6:8])
	if sign == '+' && thisYear-year < 100 {
		return "", invalid("%s: '+' is for people 100 years or older, and the year says otherwise", msg)
	}
	if day > 60 {
		day -= 60
	}
	if _, err := birthDate(year, month, day, at); err != nil {
		return "", invalid("%s: %v", msg, err)
	}
	if !luhn(d[2:]) {
		return "", invalid("%s: the check digit does not match", msg)
	}
	return s, nil
}

// luhn reports whether the last of d is the Luhn check digit of the rest.
func luhn(d []int) bool {
	sum := 0
	for i, v := range d {
		if i%2 == len(d)%2 { // double every second digit from the right, check digit excluded
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// danish reads a CPR-nummer: DDMMYY-SSSS or DDMMYYSSSS, the century from
// the seventh digit and YY. Since 2007 CPR numbers need not pass the old
// modulus-11 test, so there is no check digit to check.
func danish(id string, at time.Time) (string, error) {
	const msg = "must be a Danish CPR number (DDMMYY-SSSS)"
	s := id
	if len(s) == 11 && s[6] == '-' {
		s = s[:6] + s[7:]
	}
	if len(s) != 10 || !allDigits(s) {
		return "", invalid(msg)
	}
	d := digits(s)
	day, month, yy := number(d[0:2]), number(d[2:4]), number(d[4:6])
	if _, err := birthDate(danishCentury(d[6], yy)+yy, month, day, at); err != nil {
		return "", invalid("%s: %v", msg, err)
	}
	return s, nil
}

// danishCentury is the century of a CPR number by its seventh digit and
// its two-digit year, as the CPR office allots them.
func danishCentury(seventh, yy int) int {
	switch {
	case seventh <= 3:
		return 1900
	case seventh == 4 || seventh == 9:
		if yy <= 36 {
			return 2000
		}
		return 1900
	case yy <= 57:
		return 2000 // 5–8
	}
	return 1800
}

// finnishCenturies are the century signs of a henkilötunnus: '+' for the
// 1800s, '-' and (since 2023) Y, X, W, V and U for the 1900s, A and (since
// 2023) B to F for the 2000s. The signs of one century are not spellings
// of one another: a date and individual number may be issued with each.
var finnishCenturies = map[byte]int{'+': 1800, '-': 1900, 'Y': 1900, 'X': 1900, 'W': 1900, 'V': 1900, 'U': 1900,
	'A': 2000, 'B': 2000, 'C': 2000, 'D': 2000, 'E': 2000, 'F': 2000}

// finnishCheck are the check characters of a henkilötunnus, by the
// remainder of DDMMYYZZZ divided by 31.
const finnishCheck = "0123456789ABCDEFHJKLMNPRSTUVWXY"

// finnish reads a henkilötunnus: DDMMYY, the century sign, a three-digit
// individual number (002–999) and the check character. Its canonical form
// is the 11 characters in upper case.
func finnish(id string, at time.Time) (string, error) {
	const msg = "must be a Finnish personal identity code (DDMMYYCZZZQ)"
	s := strings.ToUpper(id)
	if len(s) != 11 || !allDigits(s[:6]) || !allDigits(s[7:10]) {
		return "", invalid(msg)
	}
	century, ok := finnishCenturies[s[6]]
	if !ok {
		return "", invalid("%s: its century sign is not one", msg)
	}
	d := digits(s[:6])
	day, month, yy := number(d[0:2]), number(d[2:4]), number(d[4:6])
	if _, err := birthDate(century+yy, month, day, at); err != nil {
		return "", invalid("%s: %v", msg, err)
	}
	individual := number(digits(s[7:10]))
	if individual < 2 {
		return "", invalid("%s: its individual number is not one", msg)
	}
	n := number(digits(s[:6]+s[7:10])) % 31
	if s[10] != finnishCheck[n] {
		return "", invalid("%s: the check character does not match", msg)
	}
	return s, nil
}
