package nationalid

import (
	"strings"
	"testing"
)

func TestNorwegianNationalIDs(t *testing.T) {
	t.Parallel()
	valid := []string{
		"01017010170", // fødselsnummer
		"31129910065",
		"15080510044",
		"41017010083", // D-number: day + 40
	}
	invalid := []string{
		"01017010171",  // second check digit wrong
		"01017010160",  // first check digit wrong
		"0101701017",   // 10 digits
		"010170101700", // 12 digits
		"0101701017a",  // a letter
		"01137010170",  // month 13
		"00017010170",  // day 0
		"32017010170",  // day 32
		"010170-10170", // separator
		"",
	}
	for _, id := range valid {
		if msg := Check(FormatNorway, id); msg != "" {
			t.Errorf("%s: %s", id, msg)
		}
	}
	for _, id := range invalid {
		msg := Check(FormatNorway, id)
		if msg == "" {
			t.Errorf("%q passed", id)
		}
		if id != "" && strings.Contains(msg, id) {
			t.Errorf("the message repeats the id: %s", msg)
		}
	}
}

func TestSwedishNationalIDs(t *testing.T) {
	t.Parallel()
	valid := []string{
		"811228-9874",   // 10 digits with '-'
		"8112289874",    // without separator
		"198112289874",  // 12 digits
		"19811228-9874", // 12 digits with '-'
		"121212+1212",   // '+': 100 years or older
		"701063-2342",   // samordningsnummer: day + 60
	}
	invalid := []string{
		"811228-9873",   // Luhn digit wrong
		"8112289875",    // Luhn digit wrong
		"811328-9874",   // month 13 (and the digit no longer matches)
		"811200-9870",   // day 0
		"81122-89874",   // separator in the wrong place
		"811228_9874",   // another separator
		"17811228-9874", // century 17
		"81122898741",   // 11 digits
		"abcdefghij",
		"",
	}
	for _, id := range valid {
		if msg := Check(FormatSweden, id); msg != "" {
			t.Errorf("%s: %s", id, msg)
		}
	}
	for _, id := range invalid {
		if Check(FormatSweden, id) == "" {
			t.Errorf("%q passed", id)
		}
	}
}

func TestGenericNationalIDs(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "ID-12345", strings.Repeat("Z9", 32)} {
		if msg := Check(FormatGeneric, id); msg != "" {
			t.Errorf("%s: %s", id, msg)
		}
	}
	for _, id := range []string{"", strings.Repeat("1", 65), "12 34", "æøå", "1_2", "1.2"} {
		if Check(FormatGeneric, id) == "" {
			t.Errorf("%q passed", id)
		}
	}
}
