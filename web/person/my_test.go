package person

import (
	"testing"
	"time"

	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/pages"
)

// TestTheValidityReadsAsItsDate: the card of an accepted consent writes
// its validity's end as the date in the person's time zone and counts the
// days to it as that date reads, also across the night Oslo springs
// forward, when the end dated tomorrow is less than 24 hours away, and
// when the end's UTC date is the day before its date in Oslo.
func TestTheValidityReadsAsItsDate(t *testing.T) {
	t.Parallel()
	oslo, err := time.LoadLocation("Europe/Oslo")
	if err != nil {
		t.Fatal(err)
	}
	frame := func(lang i18n.Lang, zone *time.Location) pages.MyFrame {
		return pages.MyFrame{ConsentFrame: pages.ConsentFrame{Lang: lang, T: i18n.ConsentTexts(lang), Zone: zone}, M: i18n.MyTexts(lang)}
	}
	given := time.Date(2026, time.December, 7, 10, 0, 0, 0, oslo)
	for _, c := range []struct {
		name                 string
		f                    pages.MyFrame
		given, until, now    time.Time
		validUntil, expireIn string
	}{
		{"P90D, two hours after it was given", frame(i18n.English, oslo), given, given.AddDate(0, 0, 90), given.Add(2 * time.Hour),
			"7 March 2027", "expires in 90 days"},
		{"across spring forward", frame(i18n.English, oslo), given,
			time.Date(2026, time.March, 29, 23, 15, 0, 0, oslo), time.Date(2026, time.March, 28, 23, 30, 0, 0, oslo),
			"29 March 2026", "expires tomorrow"},
		{"a UTC date a day behind Oslo's", frame(i18n.Norwegian, oslo), given,
			time.Date(2026, time.March, 31, 0, 30, 0, 0, oslo), time.Date(2026, time.March, 29, 12, 0, 0, 0, oslo),
			"31. mars 2026", "utløper om 2 dager"},
		{"in UTC", frame(i18n.English, nil), given,
			time.Date(2026, time.March, 31, 0, 30, 0, 0, oslo), time.Date(2026, time.March, 29, 12, 0, 0, 0, oslo),
			"30 March 2026", "expires tomorrow"},
	} {
		m := consent.MyConsent{Request: consent.Request{Status: flows.Accepted, DecidedAt: &c.given, ValidUntil: &c.until}}
		card := myConsentCard(c.f, m, c.now)
		if card.ValidUntil != c.validUntil || card.ExpiresIn != c.expireIn {
			t.Errorf("%s: %q (%s), want %q (%s)", c.name, card.ValidUntil, card.ExpiresIn, c.validUntil, c.expireIn)
		}
	}
}
