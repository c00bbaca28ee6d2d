package i18n

import "testing"

func TestNegotiate(t *testing.T) {
	tests := []struct {
		choice, header string
		want           Lang
	}{
		{"", "", English},
		{"", "nb-NO,nb;q=0.9,en;q=0.8", Norwegian},
		{"", "en-GB,en;q=0.9,nb;q=0.5", English},
		{"", "de-DE,no;q=0.7,en;q=0.3", Norwegian},
		{"", "fr", English},
		{"en", "nb", English},
		{"nb", "en", Norwegian},
		{"xx", "nb", Norwegian},
	}
	for _, tt := range tests {
		if got := Negotiate(tt.choice, tt.header); got != tt.want {
			t.Errorf("Negotiate(%q, %q) = %s, want %s", tt.choice, tt.header, got, tt.want)
		}
	}
}

func TestEveryTextIsTranslated(t *testing.T) {
	for _, l := range []Lang{English, Norwegian} {
		c := ConsentTexts(l)
		for name, s := range map[string]string{"Title": c.Title, "AsksFor": c.AsksFor, "Accept": c.Accept, "Reject": c.Reject,
			"WrongPerson": c.WrongPerson, "Expired": c.Expired, "NotFoundHelp": c.NotFoundHelp, "DecideHelp": c.DecideHelp} {
			if s == "" {
				t.Errorf("%s: %s is empty", l, name)
			}
		}
	}
	if ConsentTexts(English).Accept == ConsentTexts(Norwegian).Accept {
		t.Error("Norwegian texts are English")
	}
}
