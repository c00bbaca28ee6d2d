// Package nationalid checks national identity numbers in the formats
// flowd accepts, normalises them for comparison, and makes their blind
// index, by which a person's flows are found without opening them.
package nationalid

// National id formats, chosen by FLOWD_NATIONAL_ID_FORMAT.
const (
	FormatGeneric = "generic" // 1–64 letters, digits or '-'
	FormatNorway  = "no"      // fødselsnummer or D-number, both mod-11 check digits
	FormatSweden  = "se"      // personnummer or samordningsnummer, Luhn check digit
)

// Check reports what is wrong with id in format, or "" when it is
// valid. The message never repeats the id.
func Check(format, id string) string {
	switch format {
	case FormatNorway:
		return checkNorwegian(id)
	case FormatSweden:
		return checkSwedish(id)
	default:
		return checkGeneric(id)
	}
}

func checkGeneric(id string) string {
	if id == "" || len(id) > 64 {
		return "must be 1 to 64 letters, digits or '-'"
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return "must be 1 to 64 letters, digits or '-'"
		}
	}
	return ""
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

// checkNorwegian validates an 11-digit fødselsnummer (DDMMYY + individual
// number + two check digits) or D-number (first digit raised by 4).
func checkNorwegian(id string) string {
	if len(id) != 11 || !allDigits(id) {
		return "must be a Norwegian national identity number of 11 digits"
	}
	d := digits(id)
	day, month := d[0]*10+d[1], d[2]*10+d[3]
	if day > 40 { // a D-number
		day -= 40
	}
	if day < 1 || day > 31 || month < 1 || month > 12 {
		return "must be a Norwegian national identity number: the date is not valid"
	}
	k1 := mod11(d[:9], []int{3, 7, 6, 1, 8, 9, 4, 5, 2})
	k2 := mod11(d[:10], []int{5, 4, 3, 2, 7, 6, 5, 4, 3, 2})
	if k1 != d[9] || k2 != d[10] {
		return "must be a Norwegian national identity number: the check digits do not match"
	}
	return ""
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

// checkSwedish validates a personnummer or samordningsnummer: YYMMDD-NNNC or
// YYYYMMDDNNNC, with an optional '-' or '+' (100 years or older) before the
// last four digits, and the Luhn check digit over the ten-digit form.
func checkSwedish(id string) string {
	const msg = "must be a Swedish personal identity number (YYMMDD-NNNN or YYYYMMDDNNNN)"
	s := id
	if n := len(s); n == 11 || n == 13 {
		if sep := s[n-5]; sep == '-' || sep == '+' {
			s = s[:n-5] + s[n-4:]
		}
	}
	if (len(s) != 10 && len(s) != 12) || !allDigits(s) {
		return msg
	}
	if len(s) == 12 {
		if century := s[:2]; century != "18" && century != "19" && century != "20" {
			return msg + ": the year is not valid"
		}
		s = s[2:]
	}
	d := digits(s)
	month, day := d[2]*10+d[3], d[4]*10+d[5]
	if day > 60 { // a samordningsnummer
		day -= 60
	}
	if month < 1 || month > 12 || day < 1 || day > 31 {
		return msg + ": the date is not valid"
	}
	if !luhn(d) {
		return msg + ": the check digit does not match"
	}
	return ""
}

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
