// Package i18n picks the language of the pages the public sees (the consent
// journey) and holds their texts in English and Norwegian Bokmål, with the
// console's warning about disabled webhook endpoints.
package i18n

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"
)

// Lang is a supported language tag.
type Lang string

const (
	English   Lang = "en"
	Norwegian Lang = "nb"
)

// Negotiate returns the language to use: an explicit choice (the language
// switch) when supported, else the best of the Accept-Language header, else
// English. A malformed header counts as absent.
func Negotiate(choice, acceptLanguage string) Lang {
	if tag, err := language.Parse(choice); err == nil {
		if l, ok := match(tag); ok {
			return l
		}
	}
	// ParseAcceptLanguage orders the tags by weight and drops those of
	// weight 0, which refuse a language.
	tags, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil {
		return English
	}
	if l, ok := match(tags...); ok {
		return l
	}
	return English
}

// FromUILocales returns the best language for an OpenID Connect ui_locales
// value (BCP 47 tags separated by spaces, the preferred first), and false
// when we speak none of them.
func FromUILocales(uiLocales string) (Lang, bool) {
	var tags []language.Tag
	for i, s := range strings.Fields(uiLocales) {
		// maxUILocales bounds the work a hostile value can cause; a person
		// prefers a handful of languages, not hundreds.
		if i == maxUILocales {
			break
		}
		if tag, err := language.Parse(s); err == nil {
			tags = append(tags, tag)
		}
	}
	return match(tags...)
}

const maxUILocales = 16

// UILocales is the ui_locales value that asks an identity provider for l:
// l first, then English, the language every page of ours falls back to.
func (l Lang) UILocales() string {
	if l == English || l == "" {
		return string(English)
	}
	return string(l) + " " + string(English)
}

// supported are the tags the matcher chooses among, each with the language
// we answer in. Nynorsk and the macrolanguage "no" are answered in Bokmål;
// listing them makes them exact matches, so that "nn, en" gets Norwegian.
var supported = []struct {
	tag  language.Tag
	lang Lang
}{
	{language.English, English},
	{language.MustParse("nb"), Norwegian},
	{language.MustParse("nn"), Norwegian},
	{language.MustParse("no"), Norwegian},
}

var matcher = language.NewMatcher(func() []language.Tag {
	tags := make([]language.Tag, len(supported))
	for i, s := range supported {
		tags[i] = s.tag
	}
	return tags
}())

// match returns the language that best serves desired, in order of
// preference, and false when none of ours does. It follows CLDR's data:
// regional and script variants match, and so do languages whose speakers
// read one of ours (Danish reads Bokmål).
func match(desired ...language.Tag) (Lang, bool) {
	if len(desired) == 0 {
		return "", false
	}
	_, i, confidence := matcher.Match(desired...)
	if confidence == language.No {
		return "", false
	}
	return supported[i].lang, true
}

// Other is the language the switch offers.
func (l Lang) Other() Lang {
	if l == Norwegian {
		return English
	}
	return Norwegian
}

// String is the language tag.
func (l Lang) String() string { return string(l) }

// Name is the language's name in itself, for the switch.
func (l Lang) Name() string {
	if l == Norwegian {
		return "Norsk bokmål"
	}
	return "English"
}

// Consent holds the texts of the consent journey.
type Consent struct {
	Title            string
	AsksFor          string // "%s asks for your consent"
	Reference        string
	Regarding        string // labels the flow's referenceName: the definition has its own purpose
	ForPerson        string
	MaskedLabel      string // "%s": the last two characters, for screen readers
	AnswerBy         string
	ProveIdentity    string
	ProveWithEID     string
	TestEIDNote      string
	Decide           string
	DecideHelp       string
	Accept           string
	Reject           string
	WrongPerson      string
	WrongPersonHelp  string
	TryAnother       string
	NotYou           string
	ClosedTitle      string
	AlreadyAnswered  string
	Cancelled        string
	Expired          string
	NotFoundTitle    string
	NotFoundHelp     string
	SwitchLanguage   string
	FormExpiredTitle string
	FormExpired      string
	BackToRequest    string
	DataCategories   string
	AskedBy          string
	DataHolders      string
	Recipient        string
	Validity         string
	UntilWithdrawn   string
	Assurance        string
	LevelLow         string
	LevelSubstantial string
	LevelHigh        string
	StrongerEIDTitle string
	StrongerEID      string // "%s": the level's name
	SignInStronger   string
	// The answer, its receipts and withdrawal.
	AnsweredTitle     string
	AnsweredAccepted  string // "%s": when
	AnsweredRejected  string // "%s": when
	ValidUntil        string
	ReceiptsTitle     string
	ReceiptsHelp      string
	DownloadReceipt   string
	ViewReceipt       string
	ReceiptAccepted   string
	ReceiptRejected   string
	ReceiptWithdrawn  string
	ReceiptID         string
	ReceiptSignedAt   string
	ReceiptOrg        string
	ReceiptRecipient  string
	ReceiptText       string
	ReceiptVersion    string // "%s, version %d": the definition and its version
	ReceiptTextHash   string
	ReceiptLanguage   string
	ReceiptAssurance  string
	ReceiptNoProof    string
	ReceiptSubject    string
	ReceiptPrevious   string
	ReceiptByYou      string
	ReceiptByOrg      string
	ReceiptWithdrawer string
	// An erasure receipt, on the public page, and the person's request to
	// be erased, on their own page.
	ErasureReceipt      string
	ErasureOrg          string
	ErasureAt           string
	ErasureFlows        string
	ErasureReceiptsKept string
	ErasureKeyDestroyed string
	ErasureRetained     string
	ErasureSubject      string
	Yes, No             string
	ErasureAsk          string
	ErasureAskHelp      string
	ErasureAsked        string // "%s": when
	ErasureDone         string // "%s": when
	WithdrawTitle       string
	WithdrawHelp        string // "%s": the organization
	Withdraw            string
	WithdrawnTitle      string
	WithdrawnDone       string // "%s": the organization, which receives the data too
	WithdrawnDoneFor    string // "%[1]s": the organization; "%[2]s": the data's recipient
	WithdrawnClosed     string
	VerifyTitle         string
	VerifyHelp          string
	VerifyLabel         string
	VerifyButton        string
	VerifyValid         string
	VerifyInvalid       string
	VerifyLink          string
	// MyConsents links every consent page to the person's own page;
	// WithdrawalMeans heads what withdrawing means, WithdrawalDefault says
	// it where the definition does not.
	MyConsents        string
	WithdrawalMeans   string
	WithdrawalDefault string
}

var consent = map[Lang]Consent{
	English: {
		Title:               "Consent request",
		AsksFor:             "%s asks for your consent",
		Reference:           "Reference",
		Regarding:           "Regarding",
		ForPerson:           "This request is for the person with national identity number",
		ProveIdentity:       "First, confirm who you are. Nothing is shared until you accept.",
		ProveWithEID:        "Continue with electronic ID",
		TestEIDNote:         "Test environment: the electronic ID is a test service.",
		Decide:              "Do you consent?",
		DecideHelp:          "Your answer is final. You will then return to %s.",
		Accept:              "Accept",
		Reject:              "Reject",
		WrongPerson:         "This request is for someone else",
		WrongPersonHelp:     "The identity you signed in with does not match this request. No details of the request are shown.",
		TryAnother:          "Sign in as someone else",
		NotYou:              "Not you?",
		ClosedTitle:         "This request is closed",
		AlreadyAnswered:     "This request has already been answered. You can close this page.",
		Cancelled:           "This request was withdrawn and can no longer be answered. If you still need to answer, ask the organization that sent you the link.",
		Expired:             "This request has expired and can no longer be answered. If you still need to answer, ask the organization that sent you the link for a new one.",
		NotFoundTitle:       "Link not found",
		NotFoundHelp:        "This consent link does not exist or no longer works. Check the link you received.",
		SwitchLanguage:      "Norsk",
		MaskedLabel:         "ending in %s",
		AnswerBy:            "Answer by",
		FormExpiredTitle:    "The form has expired",
		FormExpired:         "Nothing was recorded. Open the request again and give your answer there.",
		BackToRequest:       "Back to the request",
		DataCategories:      "The data it covers",
		AskedBy:             "Who asks for your consent",
		DataHolders:         "Where the data is fetched from",
		Recipient:           "Who receives the data",
		Validity:            "How long your consent lasts",
		UntilWithdrawn:      "Until you withdraw it",
		Assurance:           "Electronic ID level required",
		LevelLow:            "low",
		LevelSubstantial:    "substantial",
		LevelHigh:           "high",
		StrongerEIDTitle:    "A stronger electronic ID is needed",
		StrongerEID:         "This consent requires an electronic ID at level %s. The one you signed in with does not reach it, so nothing has been recorded.",
		SignInStronger:      "Sign in with a stronger electronic ID",
		AnsweredTitle:       "Your answer",
		AnsweredAccepted:    "You accepted this request on %s.",
		AnsweredRejected:    "You rejected this request on %s.",
		ValidUntil:          "Your consent lasts until",
		ReceiptsTitle:       "Your receipts",
		ReceiptsHelp:        "A receipt is a record of your answer, signed by flowd. Keep it: anyone can check that it is genuine.",
		DownloadReceipt:     "Download your receipt",
		ViewReceipt:         "What the receipt says",
		ReceiptAccepted:     "Consent given",
		ReceiptRejected:     "Consent refused",
		ReceiptWithdrawn:    "Consent withdrawn",
		ReceiptID:           "Receipt number",
		ReceiptSignedAt:     "Signed",
		ReceiptOrg:          "Organization that asked",
		ReceiptRecipient:    "Recipient of the data",
		ReceiptText:         "Consent text",
		ReceiptVersion:      "%s, version %d",
		ReceiptTextHash:     "Fingerprint of the text (SHA-256)",
		ReceiptLanguage:     "Shown in",
		ReceiptAssurance:    "Electronic ID level",
		ReceiptNoProof:      "not checked",
		ReceiptSubject:      "You, as a code only flowd can match to you",
		ReceiptPrevious:     "Replaces receipt",
		ReceiptByYou:        "you",
		ReceiptByOrg:        "the organization, on your behalf",
		ReceiptWithdrawer:   "Withdrawn by",
		ErasureReceipt:      "Erasure receipt",
		ErasureOrg:          "Organization that erased",
		ErasureAt:           "Erased",
		ErasureFlows:        "Consent requests erased",
		ErasureReceiptsKept: "Consent receipts kept as evidence",
		ErasureKeyDestroyed: "Personal key destroyed",
		ErasureRetained:     "What stays, and why",
		ErasureSubject:      "The person, as a code only flowd can match to them",
		Yes:                 "yes",
		No:                  "no",
		ErasureAsk:          "Ask to have my data erased",
		ErasureAskHelp:      "%s is told that you ask it to erase what it holds of you. The law may let it keep some of it, such as evidence of your consent.",
		ErasureAsked:        "You asked to have your data erased on %s.",
		ErasureDone:         "Your data was erased on %s.",
		WithdrawTitle:       "Withdraw your consent",
		WithdrawHelp:        "You can withdraw your consent at any time. %s is told at once; what it did before stays lawful.",
		Withdraw:            "Withdraw consent",
		WithdrawnTitle:      "Your consent is withdrawn",
		WithdrawnDone:       "%s has been told. Keep the receipt below: it shows that and when you withdrew.",
		WithdrawnDoneFor:    "%[1]s has been told that you no longer consent to %[2]s receiving your data. Keep the receipt below: it shows that and when you withdrew.",
		WithdrawnClosed:     "This consent has been withdrawn. Nothing more can be done with this link.",
		VerifyTitle:         "Check a consent receipt",
		VerifyHelp:          "Paste a receipt: the text of the .jwt file. flowd checks its signature and shows what it says.",
		VerifyLabel:         "Receipt",
		VerifyButton:        "Check the receipt",
		VerifyValid:         "This receipt is genuine: flowd signed it, and it has not been changed since.",
		VerifyInvalid:       "This receipt is not genuine or has been changed.",
		VerifyLink:          "Check a receipt",
		MyConsents:          "My consents",
		WithdrawalMeans:     "If you withdraw your consent",
		WithdrawalDefault:   "You can withdraw your consent at any time. The organization is told at once and may no longer use your data on the basis of this consent from then on. What it has already done stands; it may keep data the law requires it to keep.",
	},
	Norwegian: {
		Title:               "Forespørsel om samtykke",
		AsksFor:             "%s ber om ditt samtykke",
		Reference:           "Referanse",
		Regarding:           "Gjelder",
		ForPerson:           "Forespørselen gjelder personen med fødselsnummer",
		ProveIdentity:       "Bekreft først hvem du er. Ingenting deles før du samtykker.",
		ProveWithEID:        "Fortsett med elektronisk ID",
		TestEIDNote:         "Testmiljø: den elektroniske ID-en er en testtjeneste.",
		Decide:              "Samtykker du?",
		DecideHelp:          "Svaret ditt er endelig. Deretter sendes du tilbake til %s.",
		Accept:              "Godta",
		Reject:              "Avslå",
		WrongPerson:         "Denne forespørselen gjelder noen andre",
		WrongPersonHelp:     "Identiteten du logget inn med samsvarer ikke med forespørselen. Ingen detaljer vises.",
		TryAnother:          "Logg inn som en annen",
		NotYou:              "Ikke deg?",
		ClosedTitle:         "Forespørselen er lukket",
		AlreadyAnswered:     "Denne forespørselen er allerede besvart. Du kan lukke denne siden.",
		Cancelled:           "Forespørselen er trukket tilbake og kan ikke lenger besvares. Trenger du likevel å svare, kontakt virksomheten som sendte deg lenken.",
		Expired:             "Forespørselen har utløpt og kan ikke lenger besvares. Trenger du likevel å svare, be virksomheten som sendte deg lenken om en ny.",
		NotFoundTitle:       "Fant ikke lenken",
		NotFoundHelp:        "Denne samtykkelenken finnes ikke eller virker ikke lenger. Sjekk lenken du fikk.",
		SwitchLanguage:      "English",
		MaskedLabel:         "som slutter på %s",
		AnswerBy:            "Svarfrist",
		FormExpiredTitle:    "Skjemaet er utløpt",
		FormExpired:         "Ingenting ble registrert. Åpne forespørselen på nytt og svar der.",
		BackToRequest:       "Tilbake til forespørselen",
		DataCategories:      "Opplysninger samtykket gjelder",
		AskedBy:             "Hvem som ber om samtykket",
		DataHolders:         "Hvor opplysningene hentes fra",
		Recipient:           "Hvem som mottar opplysningene",
		Validity:            "Hvor lenge samtykket varer",
		UntilWithdrawn:      "Til du trekker det tilbake",
		Assurance:           "Krav til elektronisk ID",
		LevelLow:            "lavt",
		LevelSubstantial:    "betydelig",
		LevelHigh:           "høyt",
		StrongerEIDTitle:    "Du trenger en sikrere elektronisk ID",
		StrongerEID:         "Dette samtykket krever elektronisk ID på nivå %s. Den du logget inn med, når ikke dette nivået, så ingenting er registrert.",
		SignInStronger:      "Logg inn med en sikrere elektronisk ID",
		AnsweredTitle:       "Svaret ditt",
		AnsweredAccepted:    "Du godtok denne forespørselen %s.",
		AnsweredRejected:    "Du avslo denne forespørselen %s.",
		ValidUntil:          "Samtykket varer til",
		ReceiptsTitle:       "Kvitteringene dine",
		ReceiptsHelp:        "En kvittering er et bevis på svaret ditt, signert av flowd. Ta vare på den: hvem som helst kan sjekke at den er ekte.",
		DownloadReceipt:     "Last ned kvitteringen",
		ViewReceipt:         "Hva kvitteringen sier",
		ReceiptAccepted:     "Samtykke gitt",
		ReceiptRejected:     "Samtykke avslått",
		ReceiptWithdrawn:    "Samtykke trukket tilbake",
		ReceiptID:           "Kvitteringsnummer",
		ReceiptSignedAt:     "Signert",
		ReceiptOrg:          "Virksomheten som spurte",
		ReceiptRecipient:    "Mottaker av opplysningene",
		ReceiptText:         "Samtykketekst",
		ReceiptVersion:      "%s, versjon %d",
		ReceiptTextHash:     "Fingeravtrykk av teksten (SHA-256)",
		ReceiptLanguage:     "Vist på",
		ReceiptAssurance:    "Nivå på elektronisk ID",
		ReceiptNoProof:      "ikke sjekket",
		ReceiptSubject:      "Deg, som en kode bare flowd kan knytte til deg",
		ReceiptPrevious:     "Erstatter kvittering",
		ReceiptByYou:        "deg",
		ReceiptByOrg:        "virksomheten, på dine vegne",
		ReceiptWithdrawer:   "Trukket tilbake av",
		ErasureReceipt:      "Kvittering for sletting",
		ErasureOrg:          "Virksomheten som slettet",
		ErasureAt:           "Slettet",
		ErasureFlows:        "Samtykkeforespørsler slettet",
		ErasureReceiptsKept: "Samtykkekvitteringer beholdt som bevis",
		ErasureKeyDestroyed: "Personlig nøkkel ødelagt",
		ErasureRetained:     "Hva som blir igjen, og hvorfor",
		ErasureSubject:      "Personen, som en kode bare flowd kan knytte til dem",
		Yes:                 "ja",
		No:                  "nei",
		ErasureAsk:          "Be om å få dataene mine slettet",
		ErasureAskHelp:      "%s får beskjed om at du ber den slette det den har om deg. Loven kan la den beholde noe, som bevis på samtykket ditt.",
		ErasureAsked:        "Du ba om å få dataene dine slettet %s.",
		ErasureDone:         "Dataene dine ble slettet %s.",
		WithdrawTitle:       "Trekk tilbake samtykket",
		WithdrawHelp:        "Du kan trekke tilbake samtykket når som helst. %s får beskjed med en gang; det de gjorde før, er fortsatt lovlig.",
		Withdraw:            "Trekk tilbake samtykket",
		WithdrawnTitle:      "Samtykket er trukket tilbake",
		WithdrawnDone:       "%s har fått beskjed. Ta vare på kvitteringen under: den viser at og når du trakk samtykket tilbake.",
		WithdrawnDoneFor:    "%[1]s har fått beskjed om at du ikke lenger samtykker til at %[2]s mottar opplysningene dine. Ta vare på kvitteringen under: den viser at og når du trakk samtykket tilbake.",
		WithdrawnClosed:     "Dette samtykket er trukket tilbake. Lenken kan ikke brukes til mer.",
		VerifyTitle:         "Sjekk en samtykkekvittering",
		VerifyHelp:          "Lim inn en kvittering: teksten i .jwt-filen. flowd sjekker signaturen og viser hva den sier.",
		VerifyLabel:         "Kvittering",
		VerifyButton:        "Sjekk kvitteringen",
		VerifyValid:         "Kvitteringen er ekte: flowd signerte den, og den er ikke endret siden.",
		VerifyInvalid:       "Kvitteringen er ikke ekte eller er endret.",
		VerifyLink:          "Sjekk en kvittering",
		MyConsents:          "Mine samtykker",
		WithdrawalMeans:     "Hvis du trekker samtykket tilbake",
		WithdrawalDefault:   "Du kan når som helst trekke samtykket tilbake. Virksomheten får beskjed med en gang og kan fra da av ikke lenger bruke opplysningene dine på grunnlag av dette samtykket. Det som allerede er gjort, står ved lag; opplysninger loven krever at den tar vare på, kan den beholde.",
	},
}

// Level names an assurance level (low, substantial, high) in the texts' language.
func (c Consent) Level(level string) string {
	switch level {
	case "low":
		return c.LevelLow
	case "substantial":
		return c.LevelSubstantial
	case "high":
		return c.LevelHigh
	}
	return level
}

// ConsentTexts returns the consent journey's texts in l.
func ConsentTexts(l Lang) Consent {
	if t, ok := consent[l]; ok {
		return t
	}
	return consent[English]
}

var months = map[Lang][12]string{
	English:   {"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"},
	Norwegian: {"januar", "februar", "mars", "april", "mai", "juni", "juli", "august", "september", "oktober", "november", "desember"},
}

// FormatDate writes t's date the way l writes dates: "2 January 2026",
// "2. januar 2026".
func FormatDate(l Lang, t time.Time) string {
	m := months[English]
	if mm, ok := months[l]; ok {
		m = mm
	}
	if l == Norwegian {
		return fmt.Sprintf("%d. %s %d", t.Day(), m[t.Month()-1], t.Year())
	}
	return fmt.Sprintf("%d %s %d", t.Day(), m[t.Month()-1], t.Year())
}

var periodUnits = map[Lang][4][2]string{
	English:   {{"year", "years"}, {"month", "months"}, {"week", "weeks"}, {"day", "days"}},
	Norwegian: {{"år", "år"}, {"måned", "måneder"}, {"uke", "uker"}, {"dag", "dager"}},
}

// FormatPeriod writes a period of years, months, weeks and days in l, such
// as "1 year and 6 months"; the zero period is "".
func FormatPeriod(l Lang, years, months, weeks, days int) string {
	units, ok := periodUnits[l]
	if !ok {
		units = periodUnits[English]
	}
	and := " and "
	if l == Norwegian {
		and = " og "
	}
	var parts []string
	for i, n := range []int{years, months, weeks, days} {
		switch {
		case n == 1:
			parts = append(parts, "1 "+units[i][0])
		case n > 1:
			parts = append(parts, strconv.Itoa(n)+" "+units[i][1])
		}
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + and + parts[len(parts)-1]
}

// EndpointBanner holds the console's warning about webhook endpoints flowd
// disabled because their deliveries kept failing.
type EndpointBanner struct {
	One  string // "%s": the endpoint's name
	Many string // "%s": the endpoints' names
	More string // "%d": how many more are not named
	Link string // to the Webhooks page
}

var endpointBanner = map[Lang]EndpointBanner{
	English: {
		One:  "flowd disabled the webhook endpoint “%s”: its deliveries kept failing, so it receives no events until it is enabled again.",
		Many: "flowd disabled these webhook endpoints because their deliveries kept failing: %s. They receive no events until they are enabled again.",
		More: "and %d more",
		Link: "See why on the Webhooks page",
	},
	Norwegian: {
		One:  "flowd har slått av webhook-endepunktet «%s»: leveransene til det feilet gang på gang, så det får ingen hendelser før det slås på igjen.",
		Many: "flowd har slått av disse webhook-endepunktene fordi leveransene til dem feilet gang på gang: %s. De får ingen hendelser før de slås på igjen.",
		More: "og %d til",
		Link: "Se hvorfor på Webhooks-siden",
	},
}

// EndpointBannerTexts returns the console's endpoint warning in l.
func EndpointBannerTexts(l Lang) EndpointBanner {
	if t, ok := endpointBanner[l]; ok {
		return t
	}
	return endpointBanner[English]
}
