package i18n

// My is the text of the person's own page ("My consents"), which lists
// every consent request addressed to them.
type My struct {
	Title           string
	Intro           string
	SignInHelp      string
	SignIn          string
	SignOut         string
	None            string
	Unanswered      string
	Answer          string // the link to an open request
	Status          string
	Given           string // when the consent was given
	ValidUntil      string
	ExpiresIn       string // "%d": days left
	ExpiresToday    string
	ExpiresTomorrow string
	LastUsed        string
	NotUsed         string
	History         string
	Receipts        string
	Withdraw        string
	Hidden          string // "%s": the level required
	SignInStronger  string
	// Statuses, by consent status.
	StatusUnopened  string
	StatusOpened    string
	StatusAccepted  string
	StatusRejected  string
	StatusWithdrawn string
	StatusExpired   string
	StatusClosed    string // a request cancelled or expired unanswered
	// History's happenings.
	Asked         string
	Opened        string
	Accepted      string
	Rejected      string
	Withdrawn     string
	WithdrawnByOr string // the organization withdrew it
	Expired       string
	Used          string
	// SharedWith is a consent token a data holder was given: "%s" names
	// the data holder's resource.
	SharedWith string
	Expiring   string // the organization was warned the consent runs out soon
	// The data holders told that the consent ended (Shared Signals).
	Told             string
	ToldSent         string
	ToldAcknowledged string
	ToldNotYet       string
	ToldRefused      string
	// The withdrawal's confirmation page.
	ConfirmTitle  string
	ConfirmHelp   string // "%s": the organization
	ConfirmButton string
	Cancel        string
	BackToMy      string
	NotYours      string
	// The answer to too many changes from the page in a short time.
	TooManyTitle string
	TooMany      string // "%d": minutes to wait
}

var my = map[Lang]My{
	English: {
		Title:           "My consents",
		Intro:           "Every consent request addressed to you on this service, from every organization. Only you can see this page.",
		SignInHelp:      "Sign in with your electronic ID to see the consents you have given and the requests waiting for your answer.",
		SignIn:          "Sign in with electronic ID",
		SignOut:         "Sign out",
		None:            "No organization has asked you for consent here.",
		Unanswered:      "Waiting for your answer",
		Answer:          "Answer the request",
		Status:          "Status",
		Given:           "Given",
		ValidUntil:      "Valid until",
		ExpiresIn:       "expires in %d days",
		ExpiresToday:    "expires today",
		ExpiresTomorrow: "expires tomorrow",
		LastUsed:        "Last used",
		NotUsed:         "No use recorded",
		History:         "History",
		Told:            "Data holders told that the consent ended",
		ToldSent:        "told", ToldAcknowledged: "acknowledged", ToldNotYet: "not yet acknowledged", ToldRefused: "refused the notice",
		Receipts:       "Receipts",
		Withdraw:       "Withdraw consent",
		Hidden:         "A consent that requires an electronic ID at level %s. Sign in with a stronger electronic ID to see it.",
		SignInStronger: "Sign in with a stronger electronic ID",
		StatusUnopened: "Not yet opened", StatusOpened: "Opened, not answered", StatusAccepted: "Given",
		StatusRejected: "Refused", StatusWithdrawn: "Withdrawn", StatusExpired: "Expired", StatusClosed: "Closed unanswered",
		Asked: "Asked", Opened: "Opened", Accepted: "You consented", Rejected: "You refused",
		Withdrawn: "You withdrew it", WithdrawnByOr: "The organization withdrew it on your behalf",
		Expired: "Expired", Used: "Used", Expiring: "Runs out soon: the organization has been told",
		SharedWith:    "Shown to a data holder, for %s",
		ConfirmTitle:  "Withdraw your consent?",
		ConfirmHelp:   "%s is told at once, and you get a signed receipt of the withdrawal.",
		ConfirmButton: "Yes, withdraw my consent",
		Cancel:        "No, keep it",
		BackToMy:      "Back to my consents",
		NotYours:      "There is no such consent of yours.",
		TooManyTitle:  "Please wait a little",
		TooMany:       "You have made many changes here in a short time. Try again in %d minutes.",
	},
	Norwegian: {
		Title:           "Mine samtykker",
		Intro:           "Alle samtykkeforespørsler til deg på denne tjenesten, fra alle virksomheter. Bare du kan se denne siden.",
		SignInHelp:      "Logg inn med elektronisk ID for å se samtykkene du har gitt og forespørslene som venter på svar.",
		SignIn:          "Logg inn med elektronisk ID",
		SignOut:         "Logg ut",
		None:            "Ingen virksomhet har bedt deg om samtykke her.",
		Unanswered:      "Venter på svaret ditt",
		Answer:          "Svar på forespørselen",
		Status:          "Status",
		Given:           "Gitt",
		ValidUntil:      "Gyldig til",
		ExpiresIn:       "utløper om %d dager",
		ExpiresToday:    "utløper i dag",
		ExpiresTomorrow: "utløper i morgen",
		LastUsed:        "Sist brukt",
		NotUsed:         "Ingen bruk registrert",
		History:         "Historikk",
		Told:            "Dataholdere som er varslet om at samtykket er avsluttet",
		ToldSent:        "varslet", ToldAcknowledged: "bekreftet", ToldNotYet: "ikke bekreftet ennå", ToldRefused: "avviste varselet",
		Receipts:       "Kvitteringer",
		Withdraw:       "Trekk tilbake samtykket",
		Hidden:         "Et samtykke som krever elektronisk ID på nivå %s. Logg inn med en sterkere elektronisk ID for å se det.",
		SignInStronger: "Logg inn med en sterkere elektronisk ID",
		StatusUnopened: "Ikke åpnet", StatusOpened: "Åpnet, ikke besvart", StatusAccepted: "Gitt",
		StatusRejected: "Avslått", StatusWithdrawn: "Trukket tilbake", StatusExpired: "Utløpt", StatusClosed: "Lukket uten svar",
		Asked: "Forespurt", Opened: "Åpnet", Accepted: "Du samtykket", Rejected: "Du avslo",
		Withdrawn: "Du trakk det tilbake", WithdrawnByOr: "Virksomheten trakk det tilbake på dine vegne",
		Expired: "Utløpt", Used: "Brukt", Expiring: "Går snart ut: virksomheten har fått beskjed",
		SharedWith:    "Vist til en datakilde, for %s",
		ConfirmTitle:  "Trekke tilbake samtykket?",
		ConfirmHelp:   "%s får beskjed med en gang, og du får en signert kvittering for at du trakk det tilbake.",
		ConfirmButton: "Ja, trekk tilbake samtykket",
		Cancel:        "Nei, behold det",
		BackToMy:      "Tilbake til mine samtykker",
		NotYours:      "Du har ikke noe slikt samtykke.",
		TooManyTitle:  "Vent litt",
		TooMany:       "Du har gjort mange endringer her på kort tid. Prøv igjen om %d minutter.",
	},
}

// MyTexts returns the person's own page's text in l; English for a
// language it does not have.
func MyTexts(l Lang) My {
	if t, ok := my[l]; ok {
		return t
	}
	return my[English]
}
