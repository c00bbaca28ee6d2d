package httpkit

import (
	"github.com/flowd/flowd/modules/consent"
	"github.com/flowd/flowd/views/i18n"
	"github.com/flowd/flowd/views/pages"
)

// ConsentTextOf is a definition version's text in the page's language, as
// organization, its registered name, asks for it: on the consent page and
// in the console's preview of a draft. values are a flow's parameters,
// shown under their labels (a preview shows none).
func ConsentTextOf(v consent.Version, values map[string]string, organization string, frame pages.ConsentFrame) pages.ConsentText {
	lang := string(frame.Lang)
	x := pages.ConsentText{Title: v.Title.In(lang), Organization: organization, Recipient: v.Recipient,
		Assurance: frame.T.Level(string(v.AssuranceLevel)),
		Validity:  i18n.FormatPeriod(frame.Lang, v.Validity.Years, v.Validity.Months, v.Validity.Weeks, v.Validity.Days)}
	x.Purpose = TextBlocksOf(v.Purpose.In(lang))
	for _, c := range v.DataCategories {
		x.DataCategories = append(x.DataCategories, c.In(lang))
	}
	for _, p := range v.Parameters {
		if val, ok := values[p.Name]; ok {
			x.Parameters = append(x.Parameters, pages.Labelled{Label: p.Label.In(lang), Value: val})
		}
	}
	x.Resources = v.Resources
	x.Withdrawal = TextBlocksOf(WithdrawalConsequencesOf(v, frame))
	return x
}

// TextBlocksOf is a plain text's paragraphs and lists.
func TextBlocksOf(text string) []pages.TextBlock {
	var out []pages.TextBlock
	for _, b := range consent.Blocks(text) {
		out = append(out, pages.TextBlock(b))
	}
	return out
}

// WithdrawalConsequencesOf says what withdrawing a consent given under v
// means, in the page's language: the definition's text, or the default.
func WithdrawalConsequencesOf(v consent.Version, frame pages.ConsentFrame) string {
	if v.WithdrawalConsequences.IsZero() {
		return frame.T.WithdrawalDefault
	}
	return v.WithdrawalConsequences.In(string(frame.Lang))
}
