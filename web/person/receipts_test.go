package person

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/modules/consent/receipts"
	"github.com/flowd/flowd/modules/flows"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/pages"
)

// TestTheReceiptCardNamesBothParties: a receipt written out for people says
// who asked (the organization) and who receives the data, in both
// languages; a receipt from before the recipient had a claim of its own is
// shown for what its organizationName was, the recipient.
func TestTheReceiptCardNamesBothParties(t *testing.T) {
	t.Parallel()
	receipt := receipts.Receipt{ID: "r1", IssuedAt: 1767323045, ReferenceID: "ACME-1", OrganizationID: "org-a",
		OrganizationName: "Acme Bank", Recipient: "Kredittbyrået AS", Decision: flows.DecisionWithdrawn,
		WithdrawnBy: flows.ByIndividual, Definition: receipts.Definition{ID: "credit-check", Version: 1, Language: "nb"}}
	earlier := receipt
	earlier.OrganizationName, earlier.Recipient = "Kredittbyrået AS", ""
	lines := func(lang i18n.Lang, r receipts.Receipt) map[string]string {
		out := map[string]string{}
		for _, l := range receiptCard(pages.ConsentFrame{Lang: lang, T: i18n.ConsentTexts(lang)}, r, "").Lines {
			out[l.Label] = l.Value
		}
		return out
	}
	for _, tt := range []struct {
		lang             i18n.Lang
		r                receipts.Receipt
		org, orgLabel    string
		recipient, label string
		told             string
	}{
		{i18n.English, receipt, "Acme Bank", "Organization that asked", "Kredittbyrået AS", "Recipient of the data",
			"Acme Bank has been told that you no longer consent to Kredittbyrået AS receiving your data."},
		{i18n.Norwegian, receipt, "Acme Bank", "Virksomheten som spurte", "Kredittbyrået AS", "Mottaker av opplysningene",
			"Acme Bank har fått beskjed om at du ikke lenger samtykker til at Kredittbyrået AS mottar opplysningene dine."},
		{i18n.English, earlier, "", "Organization that asked", "Kredittbyrået AS", "Recipient of the data", "Kredittbyrået AS has been told."},
	} {
		got := lines(tt.lang, tt.r)
		if got[tt.orgLabel] != tt.org || got[tt.label] != tt.recipient {
			t.Errorf("%s, recipient %q: the card says %v, want %s %q and %s %q", tt.lang, tt.r.Recipient, got,
				tt.orgLabel, tt.org, tt.label, tt.recipient)
		}
		if _, shown := got[tt.orgLabel]; shown != (tt.org != "") {
			t.Errorf("%s, recipient %q: the organization line is shown: %v", tt.lang, tt.r.Recipient, shown)
		}
		if msg := withdrawnMessage(i18n.ConsentTexts(tt.lang), tt.r); !strings.HasPrefix(msg, tt.told) {
			t.Errorf("%s, recipient %q: the withdrawal says %q, want %q…", tt.lang, tt.r.Recipient, msg, tt.told)
		}
	}
	same := receipt
	same.Recipient = "Acme Bank"
	if msg := withdrawnMessage(i18n.ConsentTexts(i18n.English), same); !strings.HasPrefix(msg, "Acme Bank has been told. Keep") {
		t.Errorf("an organization that receives the data itself: %q", msg)
	}
}
