package i18n

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

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

func TestFromUILocales(t *testing.T) {
	tests := []struct {
		uiLocales string
		want      Lang
		ok        bool
	}{
		{"", "", false},
		{"nb", Norwegian, true},
		{"nb-NO en", Norwegian, true},
		{"no", Norwegian, true},
		{"nn", Norwegian, true},
		{"en nb", English, true},
		{"en-GB", English, true},
		{"de fr-CA  nn", Norwegian, true},
		{"de fr", "", false},
		{strings.Repeat("de ", 16) + "nb", "", false},
	}
	for _, tt := range tests {
		if got, ok := FromUILocales(tt.uiLocales); got != tt.want || ok != tt.ok {
			t.Errorf("FromUILocales(%q) = %q, %v, want %q, %v", tt.uiLocales, got, ok, tt.want, tt.ok)
		}
	}
}

func TestUILocalesRoundTrips(t *testing.T) {
	for _, l := range []Lang{English, Norwegian} {
		if got, ok := FromUILocales(l.UILocales()); !ok || got != l {
			t.Errorf("%s.UILocales() = %q reads back as %q", l, l.UILocales(), got)
		}
	}
	if English.UILocales() != "en" || Norwegian.UILocales() != "nb en" {
		t.Errorf("UILocales: %q, %q", English.UILocales(), Norwegian.UILocales())
	}
}

func TestEveryTextIsTranslated(t *testing.T) {
	check := func(name string, en, nb any) {
		ev, nv := reflect.ValueOf(en), reflect.ValueOf(nb)
		for i := range ev.NumField() {
			field := ev.Type().Field(i).Name
			e, n := ev.Field(i).String(), nv.Field(i).String()
			if e == "" || n == "" {
				t.Errorf("%s.%s is empty in a language: %q / %q", name, field, e, n)
			}
			if e == n && len(e) > 8 {
				t.Errorf("%s.%s is not translated: %q", name, field, e)
			}
			if strings.Count(e, "%s") != strings.Count(n, "%s") {
				t.Errorf("%s.%s: the languages take different arguments: %q / %q", name, field, e, n)
			}
		}
	}
	check("Consent", ConsentTexts(English), ConsentTexts(Norwegian))
	check("TestEID", TestEIDTexts(English), TestEIDTexts(Norwegian))
	if ConsentTexts("xx") != ConsentTexts(English) || TestEIDTexts("xx") != TestEIDTexts(English) {
		t.Error("an unknown language does not fall back to English")
	}
}

func TestFormatDate(t *testing.T) {
	d := time.Date(2026, time.May, 2, 23, 0, 0, 0, time.UTC)
	if got := FormatDate(English, d); got != "2 May 2026" {
		t.Errorf("English: %q", got)
	}
	if got := FormatDate(Norwegian, d); got != "2. mai 2026" {
		t.Errorf("Norwegian: %q", got)
	}
}
