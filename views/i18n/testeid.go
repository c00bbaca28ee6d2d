package i18n

// TestEID holds the texts of the built-in provider's test eID page.
type TestEID struct {
	Title          string
	Banner         string // after the bold "TEST identity provider."
	BannerStrong   string
	ProveTo        string // "%s": the relying party's name
	NationalID     string
	NationalIDHelp string
	Submit         string
	BadNationalID  string
	SwitchLanguage string
	AssuranceLevel string
	AssuranceHelp  string
	BadLevel       string
	LevelLow       string
	LevelSubst     string
	LevelHigh      string
}

// Level names an assurance level (low, substantial, high) in the texts' language.
func (t TestEID) Level(level string) string {
	switch level {
	case "low":
		return t.LevelLow
	case "substantial":
		return t.LevelSubst
	case "high":
		return t.LevelHigh
	}
	return level
}

var testEID = map[Lang]TestEID{
	English: {
		Title:          "Test eID",
		BannerStrong:   "TEST identity provider.",
		Banner:         "Not a real eID: anyone can sign in as anyone. For development and sandbox use only.",
		ProveTo:        "Prove your identity to %s",
		NationalID:     "National identity number",
		NationalIDHelp: "1 to 64 letters, digits or -.",
		Submit:         "Sign in as this person",
		BadNationalID:  "Type a national identity number of 1 to 64 letters, digits or -.",
		SwitchLanguage: "Norsk",
		AssuranceLevel: "Assurance level of this test sign-in",
		AssuranceHelp:  "A real eID reaches the level of the means used; here you choose it.",
		BadLevel:       "Pick one of the levels offered.",
		LevelLow:       "Low",
		LevelSubst:     "Substantial",
		LevelHigh:      "High",
	},
	Norwegian: {
		Title:          "Test-eID",
		BannerStrong:   "TEST-identitetstilbyder.",
		Banner:         "Ikke en ekte eID: hvem som helst kan logge inn som hvem som helst. Kun for utvikling og testmiljø.",
		ProveTo:        "Bekreft identiteten din overfor %s",
		NationalID:     "Fødselsnummer",
		NationalIDHelp: "1 til 64 bokstaver, sifre eller -.",
		Submit:         "Logg inn som denne personen",
		BadNationalID:  "Skriv et fødselsnummer på 1 til 64 bokstaver, sifre eller -.",
		SwitchLanguage: "English",
		AssuranceLevel: "Sikkerhetsnivå for denne testinnloggingen",
		AssuranceHelp:  "En ekte eID når nivået til innloggingsmetoden; her velger du det selv.",
		BadLevel:       "Velg et av nivåene som tilbys.",
		LevelLow:       "Lavt",
		LevelSubst:     "Betydelig",
		LevelHigh:      "Høyt",
	},
}

// TestEIDTexts returns the test eID page's texts in l.
func TestEIDTexts(l Lang) TestEID {
	if t, ok := testEID[l]; ok {
		return t
	}
	return testEID[English]
}
