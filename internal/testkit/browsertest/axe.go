package browsertest

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// axeSource is axe-core, vendored under axe/ with its licence: the
// accessibility rules of the page tests.
//
//go:embed axe/axe.min.js
var axeSource string

// Violation is one axe-core rule a page breaks, with how many elements.
type Violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []string `json:"target"`
	} `json:"nodes"`
}

func (v Violation) String() string {
	var targets []string
	for _, n := range v.Nodes {
		targets = append(targets, strings.Join(n.Target, " "))
	}
	return fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(targets, ", "))
}

// Accessibility runs axe-core's WCAG 2.x A and AA rules on the page the
// browser shows and returns the serious and critical violations.
func (b *Browser) Accessibility() ([]Violation, error) {
	var all []Violation
	err := b.Try(
		chromedp.Evaluate(axeSource+";true", nil),
		chromedp.Evaluate(`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}, resultTypes: ["violations"]}).then(r => r.violations)`,
			&all, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
	)
	if err != nil {
		return nil, err
	}
	var serious []Violation
	for _, v := range all {
		if v.Impact == "serious" || v.Impact == "critical" {
			serious = append(serious, v)
		}
	}
	return serious, nil
}

// CheckAccessibility fails the test when axe-core finds a serious or
// critical violation on the page the browser shows, naming each.
func (b *Browser) CheckAccessibility(page string) {
	b.t.Helper()
	v, err := b.Accessibility()
	if err != nil {
		b.t.Fatalf("axe-core on %s: %v", page, err)
	}
	for _, x := range v {
		b.t.Errorf("accessibility of %s: %s", page, x)
	}
}
