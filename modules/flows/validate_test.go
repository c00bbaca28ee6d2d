package flows

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/apperr"
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
		if msg := CheckNationalID(FormatNorway, id); msg != "" {
			t.Errorf("%s: %s", id, msg)
		}
	}
	for _, id := range invalid {
		msg := CheckNationalID(FormatNorway, id)
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
		if msg := CheckNationalID(FormatSweden, id); msg != "" {
			t.Errorf("%s: %s", id, msg)
		}
	}
	for _, id := range invalid {
		if CheckNationalID(FormatSweden, id) == "" {
			t.Errorf("%q passed", id)
		}
	}
}

func TestGenericNationalIDs(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "ID-12345", strings.Repeat("Z9", 32)} {
		if msg := CheckNationalID(FormatGeneric, id); msg != "" {
			t.Errorf("%s: %s", id, msg)
		}
	}
	for _, id := range []string{"", strings.Repeat("1", 65), "12 34", "æøå", "1_2", "1.2"} {
		if CheckNationalID(FormatGeneric, id) == "" {
			t.Errorf("%q passed", id)
		}
	}
}

func TestNewFlowValidation(t *testing.T) {
	t.Parallel()
	ok := NewFlow{NationalID: "ID-1", LastName: "Nordmann", RedirectURL: "https://bank.example/cb"}
	tests := []struct {
		name   string
		change func(*NewFlow)
		rules  Rules
		fields string
	}{
		{"valid", func(*NewFlow) {}, Rules{}, ""},
		{"missing", func(f *NewFlow) { *f = NewFlow{} }, Rules{}, "nationalId,lastName,redirectUrl"},
		{"http elsewhere", func(f *NewFlow) { f.RedirectURL = "http://bank.example/" }, Rules{}, "redirectUrl"},
		{"http elsewhere, insecure allowed", func(f *NewFlow) { f.RedirectURL = "http://bank.example/" }, Rules{AllowInsecureURLs: true}, ""},
		{"http on localhost", func(f *NewFlow) { f.RedirectURL = "http://localhost:8080/cb" }, Rules{}, ""},
		{"http on ::1", func(f *NewFlow) { f.WebhookURL = "http://[::1]:9000/h" }, Rules{}, ""},
		{"http on 127.1.2.3", func(f *NewFlow) { f.WebhookURL = "http://127.1.2.3/h" }, Rules{}, ""},
		{"no host", func(f *NewFlow) { f.RedirectURL = "https:///path" }, Rules{}, "redirectUrl"},
		{"space", func(f *NewFlow) { f.RedirectURL = "https://bank.example/a b" }, Rules{}, "redirectUrl"},
		{"user info", func(f *NewFlow) { f.WebhookURL = "https://user@hooks.example/" }, Rules{}, "webhookUrl"},
		{"mailto", func(f *NewFlow) { f.RedirectURL = "mailto:a@b.example" }, Rules{}, "redirectUrl"},
		{"allow-listed", func(f *NewFlow) {}, Rules{RedirectOrigins: []string{"https://other.example", "https://BANK.example:443"}}, ""},
		{"not allow-listed", func(f *NewFlow) {}, Rules{RedirectOrigins: []string{"https://bank.example:8443"}}, "redirectUrl"},
		{"allow-list does not bind webhooks", func(f *NewFlow) { f.WebhookURL = "https://hooks.example/" }, Rules{RedirectOrigins: []string{"https://bank.example"}}, ""},
		{"200 characters", func(f *NewFlow) { f.LastName = strings.Repeat("ø", 200) }, Rules{}, ""},
		{"201 characters", func(f *NewFlow) { f.LastName = strings.Repeat("ø", 201) }, Rules{}, "lastName"},
		{"newline", func(f *NewFlow) { f.ReferenceName = "a\nb" }, Rules{}, "referenceName"},
		{"national id by format", func(f *NewFlow) { f.NationalID = "ID-1" }, Rules{NationalIDFormat: FormatSweden}, "nationalId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ok
			tt.change(&in)
			err := in.Normalize().Validate(tt.rules)
			var got []string
			if e, isApp := apperr.As(err); isApp {
				for _, f := range e.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != tt.fields {
				t.Fatalf("fields %v, want %q (%v)", got, tt.fields, err)
			}
		})
	}
}

func TestListParamsCheck(t *testing.T) {
	t.Parallel()
	p := ListParams{}
	if err := p.Check(); err != nil || p.Limit != DefaultLimit {
		t.Fatalf("defaults: %v %d", err, p.Limit)
	}
	p = ListParams{Limit: 101, Status: "active", StartingAfter: "x", EndingBefore: "y"}
	e, _ := apperr.As(p.Check())
	var got []string
	for _, f := range e.Fields {
		got = append(got, f.Field)
	}
	if strings.Join(got, ",") != "limit,status,ending_before,starting_after,ending_before" {
		t.Fatalf("fields %v", got)
	}
}

// TestListParamsRefuseReferencesPostgreSQLWouldNot: a reference search that
// PostgreSQL would refuse is refused before it is queued in a round trip
// other reads may share.
func TestListParamsRefuseReferencesPostgreSQLWouldNot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ref string
		ok  bool
	}{
		{"DEMO-12", true},
		{"ÅSE-1", true},
		{strings.Repeat("A", 100), true},
		{strings.Repeat("A", 101), false},
		{"DEMO\x00-1", false},
		{"DEMO-\xff", false},
	} {
		p := ListParams{ReferenceID: tt.ref}
		err := p.Check()
		if tt.ok != (err == nil) {
			t.Errorf("reference %q: %v, want ok %v", tt.ref, err, tt.ok)
		}
		if e, _ := apperr.As(err); err != nil && (len(e.Fields) != 1 || e.Fields[0].Field != "referenceId") {
			t.Errorf("reference %q: %v, want one referenceId problem", tt.ref, err)
		}
	}
}
