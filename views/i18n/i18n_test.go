package i18n

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNegotiate(t *testing.T) {
	tests := []struct {
		name, choice, header string
		want                 Lang
	}{
		{"nothing", "", "", English},
		{"Norwegian first", "", "nb-NO,nb;q=0.9,en;q=0.8", Norwegian},
		{"English first", "", "en-GB,en;q=0.9,nb;q=0.5", English},
		{"no is Bokmål", "", "de-DE,no;q=0.7,en;q=0.3", Norwegian},
		{"Nynorsk is answered in Bokmål", "", "nn-NO,nn;q=0.9,en;q=0.5", Norwegian},
		{"Nynorsk before English", "", "nn, en", Norwegian},
		{"Bokmål in Sweden", "", "nb-SE", Norwegian},
		{"English in Norway", "", "en-NO, nb;q=0.5", English},
		{"Danish reads Bokmål (CLDR)", "", "da", Norwegian},
		{"but English is an exact match", "", "da, en", English},
		{"neither", "", "fr", English},
		{"neither, in order", "", "fr, de;q=0.9", English},
		{"q orders, not position", "", "en;q=0.5, nb;q=0.8", Norwegian},
		{"q=0 refuses", "", "nb;q=0, fr", English},
		{"q=0 refuses Norwegian in any form", "", "nb;q=0, fr, en;q=0.1", English},
		{"q=0.0 refuses", "", "en;q=0.0, nb;q=0.5", Norwegian},
		{"the wildcard alone", "", "*", English},
		{"the wildcard after a choice", "", "nb, *;q=0.5", Norwegian},
		{"the wildcard before a choice", "", "*;q=0.1, nb", Norwegian},
		{"case does not matter", "", "NB-no", Norwegian},
		{"whitespace", "", "  fr ,  nb ; q=0.9 ", Norwegian},
		{"garbage", "", "@@@, ;;;", English},
		{"a malformed weight", "", "nb;q=high", English},
		{"no tag", "", "q=1", English},
		{"empty entries", "", ",,nb,,", Norwegian},
		{"an over-long header", "", strings.Repeat("xx-", 2000) + "nb", English},
		{"choice wins", "en", "nb", English},
		{"choice wins the other way", "nb", "en", Norwegian},
		{"an unknown choice is ignored", "xx", "nb", Norwegian},
		{"a malformed choice is ignored", "@@", "nb", Norwegian},
		{"a choice of no", "no", "en", Norwegian},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Negotiate(tt.choice, tt.header); got != tt.want {
				t.Errorf("Negotiate(%q, %q) = %s, want %s", tt.choice, tt.header, got, tt.want)
			}
		})
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
		{"@@ nb", Norwegian, true},
		{"da", Norwegian, true},
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
	check("EndpointBanner", EndpointBannerTexts(English), EndpointBannerTexts(Norwegian))
	if ConsentTexts("xx") != ConsentTexts(English) || TestEIDTexts("xx") != TestEIDTexts(English) ||
		EndpointBannerTexts("xx") != EndpointBannerTexts(English) {
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
