package consent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/apperr"
	"github.com/flowd/flowd/internal/assurance"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/internal/etag"
	"github.com/flowd/flowd/internal/fieldcheck"
)

// A consent definition is what an organization asks its individuals to
// consent to: a title, a purpose, the data it covers, who receives it, how
// long a consent lasts and how sure the eID must be of the person. It is
// versioned: a published version never changes, flows pin one, and a
// decision records the hash of its text.

// Text is a text in each language the consent pages speak.
type Text struct {
	EN string `json:"en"`
	NB string `json:"nb"`
}

// IsZero reports whether t is empty in both languages.
func (t Text) IsZero() bool { return t == Text{} }

// In returns the text in lang ("en" or "nb"); English for any other.
func (t Text) In(lang string) string {
	if lang == "nb" {
		return t.NB
	}
	return t.EN
}

// Definition is a consent definition apart from its versions.
type Definition struct {
	OrganizationID string
	ID             string
	// Default marks the definition flows get when they name none; every
	// organization has one.
	Default       bool
	LatestVersion int
	CreatedAt     time.Time
	RetiredAt     *time.Time // no new flows once set
}

// Retired reports whether new flows may no longer use the definition.
func (d Definition) Retired() bool { return d.RetiredAt != nil }

// ETag is the entity tag of the definition shown with its version n. A
// version never changes; what the definition adds to it changes only when a
// version is published (LatestVersion) and when it is retired, once.
func (d Definition) ETag(n int) string {
	tag := "v" + strconv.Itoa(n) + "-" + strconv.Itoa(d.LatestVersion)
	if d.Retired() {
		tag += "-retired"
	}
	return etag.Strong(tag)
}

// Version is one published, immutable version of a definition.
type Version struct {
	DefinitionID   string
	Version        int
	Tag            string // optional label, such as a document number
	Title          Text
	Purpose        Text // plain text: paragraphs, and lists of "- " lines
	DataCategories []Text
	Recipient      string // who receives the consent: the organization unless named
	Validity       Validity
	// Retention is how long a completed flow of the version is kept before
	// flowd erases it; the zero Validity keeps it until it is deleted.
	Retention      Validity
	AssuranceLevel assurance.Level
	// WithdrawalConsequences says what withdrawing a consent means for the
	// person; empty: the consent pages' plain default.
	WithdrawalConsequences Text
	// Resources are the URIs of the registered resources the consent
	// opens: the audiences a consent token of the flow may name.
	Resources []string
	// Parameters are what the text shows of each flow, valued by the flow.
	Parameters  []Parameter
	TextSHA256  []byte // of CanonicalText
	PublishedBy string
	PublishedAt time.Time
}

// Published is a definition with one of its versions.
type Published struct {
	Definition Definition
	Version    Version
}

// ETag is the entity tag of the definition with this version.
func (p Published) ETag() string { return p.Definition.ETag(p.Version.Version) }

// Draft is a version before it is published.
type Draft struct {
	Tag            string
	Title          Text
	Purpose        Text
	DataCategories []Text
	Recipient      string // empty: the organization's name
	Validity       string // ISO 8601 duration such as P90D; empty: until withdrawn
	// Retention is an ISO 8601 duration such as P5Y: how long a completed
	// flow is kept; empty: until deleted.
	Retention      string
	AssuranceLevel assurance.Level
	// WithdrawalConsequences is optional, in both languages or neither.
	WithdrawalConsequences Text
	// Resources are registered resources' URIs; optional.
	Resources []string
	// Parameters are optional.
	Parameters []Parameter
}

// Parameter is a value the consent's text shows, given by each flow (an
// income year, an account number): its name, as a flow's parameters name
// it, and its label on the consent page.
type Parameter struct {
	Name  string `json:"name"`
	Label Text   `json:"label"`
}

// Limits of a definition's parameters and of a flow's values of them.
const (
	MaxParameters     = 20
	MaxParameterLabel = 200
)

var parameterNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// Author is who changes an organization's definitions: an API client, or
// "staff:<username>" from the console.
type Author struct {
	OrganizationID string
	By             string
}

// DefaultDefinitionID is the id of the definition every organization starts
// with; its text says what flowd said before definitions existed.
const DefaultDefinitionID = "consent"

// ErrDefinitionNotFound: no such definition or version in the organization.
var ErrDefinitionNotFound = errors.New("consent definition not found")

// Definitions keeps organizations' consent definitions. Every method is
// scoped to one organization, whose default definition it creates on first
// use.
type Definitions interface {
	// List returns the organization's definitions with their latest
	// versions, by id.
	List(ctx context.Context, organizationID string) ([]Published, error)
	// Get returns a definition with version n, or its latest when n is 0.
	// ErrDefinitionNotFound.
	Get(ctx context.Context, organizationID, id string, n int) (Published, error)
	// Create makes a definition with d as its version 1. Bad input is one
	// apperr Invalid error naming every field; an id in use is apperr
	// Conflict. before runs in the write's transaction (database.BeforeCommit),
	// as it does for Publish and Retire.
	Create(ctx context.Context, a Author, id string, d Draft, before ...database.BeforeCommit[Published]) (Published, error)
	// Publish adds d as the definition's next version. ErrDefinitionNotFound;
	// apperr Invalid; apperr Conflict when the definition is retired.
	Publish(ctx context.Context, a Author, id string, d Draft, before ...database.BeforeCommit[Published]) (Published, error)
	// Retire stops new flows from using the definition; flows that pinned it
	// keep it. Retiring twice is no error. cond is checked against the ETag
	// of the definition with its latest version under the retirement's lock:
	// when it does not hold, nothing changes. ErrDefinitionNotFound; apperr
	// PreconditionFailed; apperr Conflict for the default definition.
	Retire(ctx context.Context, a Author, id string, cond etag.IfMatch, before ...database.BeforeCommit[Definition]) (Definition, error)
	// Preview returns d as it would be published as the definition's next
	// version (version 1 of a new one), without storing anything. apperr
	// Invalid.
	Preview(ctx context.Context, organizationID, id string, d Draft) (Version, error)
}

// Limits of a draft, in characters.
const (
	MaxTitle          = 200
	MaxText           = 10000
	MaxCategory       = 200
	MaxDataCategories = 50
	MaxTag            = 64
)

var definitionIDRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$`)

// ValidDefinitionID reports whether id is a definition id: a slug of
// lowercase letters, digits and inner hyphens, at most 64 characters. "new"
// is kept back: the console's form for a new definition has that address.
func ValidDefinitionID(id string) bool { return id != "new" && definitionIDRE.MatchString(id) }

// Normalize trims d's texts and turns CRLF line ends into LF.
func (d Draft) Normalize() Draft {
	text := func(s string) string {
		return strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n"))
	}
	both := func(t Text) Text { return Text{EN: text(t.EN), NB: text(t.NB)} }
	out := Draft{Tag: text(d.Tag), Title: both(d.Title), Purpose: both(d.Purpose), Recipient: text(d.Recipient),
		Validity: text(d.Validity), Retention: text(d.Retention), AssuranceLevel: assurance.Level(text(string(d.AssuranceLevel))),
		WithdrawalConsequences: both(d.WithdrawalConsequences)}
	for _, c := range d.DataCategories {
		out.DataCategories = append(out.DataCategories, both(c))
	}
	for _, r := range d.Resources {
		out.Resources = append(out.Resources, strings.TrimSpace(r))
	}
	for _, p := range d.Parameters {
		out.Parameters = append(out.Parameters, Parameter{Name: strings.TrimSpace(p.Name), Label: both(p.Label)})
	}
	return out
}

// Validate checks a normalized draft; the error names each field as the API
// does (title.en, dataCategories[0].nb, …).
func (d Draft) Validate() error {
	var f apperr.Fields
	checkText(&f, "versionTag", d.Tag, MaxTag, false, false)
	for _, l := range []struct{ field, value string }{{"en", d.Title.EN}, {"nb", d.Title.NB}} {
		checkText(&f, "title."+l.field, l.value, MaxTitle, true, false)
	}
	for _, l := range []struct{ field, value string }{{"en", d.Purpose.EN}, {"nb", d.Purpose.NB}} {
		checkText(&f, "purpose."+l.field, l.value, MaxText, true, true)
	}
	if len(d.DataCategories) > MaxDataCategories {
		f.Add("dataCategories", "must list at most %d categories", MaxDataCategories)
	}
	for i, c := range d.DataCategories {
		checkText(&f, fmt.Sprintf("dataCategories[%d].en", i), c.EN, MaxCategory, true, false)
		checkText(&f, fmt.Sprintf("dataCategories[%d].nb", i), c.NB, MaxCategory, true, false)
	}
	checkText(&f, "recipient", d.Recipient, MaxTitle, false, false)
	if d.Validity != "" {
		if _, err := ParseValidity(d.Validity); err != nil {
			f.Add("validity", "%s", err.Error())
		}
	}
	if d.Retention != "" {
		if _, err := ParseValidity(d.Retention); err != nil {
			f.Add("retention", "%s", strings.Replace(err.Error(), "a consent valid until withdrawn", "flows kept until deleted", 1))
		}
	}
	if w := d.WithdrawalConsequences; !w.IsZero() {
		checkText(&f, "withdrawalConsequences.en", w.EN, MaxText, true, true)
		checkText(&f, "withdrawalConsequences.nb", w.NB, MaxText, true, true)
	}
	if d.AssuranceLevel != "" && !d.AssuranceLevel.Valid() {
		f.Add("assuranceLevel", "must be low, substantial or high")
	}
	if len(d.Resources) > MaxResources {
		f.Add("resources", "must list at most %d resources", MaxResources)
	}
	for i, r := range d.Resources {
		if msg := CheckResourceURI(r); msg != "" {
			f.Add(fmt.Sprintf("resources[%d]", i), "%s", msg)
		} else if slices.Index(d.Resources, r) < i {
			f.Add(fmt.Sprintf("resources[%d]", i), "is listed twice")
		}
	}
	if len(d.Parameters) > MaxParameters {
		f.Add("parameters", "must list at most %d parameters", MaxParameters)
	}
	for i, p := range d.Parameters {
		field := fmt.Sprintf("parameters[%d]", i)
		if !parameterNameRE.MatchString(p.Name) {
			f.Add(field+".name", "must be 1 to 64 letters A-Z, digits and underscores, starting with a letter, such as incomeYear")
		} else if slices.IndexFunc(d.Parameters, func(q Parameter) bool { return q.Name == p.Name }) < i {
			f.Add(field+".name", "is declared twice")
		}
		checkText(&f, field+".label.en", p.Label.EN, MaxParameterLabel, true, false)
		checkText(&f, field+".label.nb", p.Label.NB, MaxParameterLabel, true, false)
	}
	return f.Err()
}

// checkText adds field's problem: empty when required, too long, or not
// plain text. Line breaks are allowed only in multiline texts.
func checkText(f *apperr.Fields, field, s string, limit int, required, multiline bool) {
	switch {
	case s == "" && required:
		f.Add(field, "is required")
	case !utf8.ValidString(s):
		f.Add(field, "must be UTF-8 text")
	case utf8.RuneCountInString(s) > limit:
		f.Add(field, "must be at most %d characters", limit)
	case !plain(s, multiline):
		f.Add(field, "must be plain text without control or formatting characters")
	}
}

// plain reports whether s holds none of the characters fieldcheck refuses
// in text (control and formatting characters, the line and paragraph
// separators, which the canonical form would also escape differently from
// RFC 8785) but tabs and, in multiline text, line feeds.
func plain(s string, multiline bool) bool {
	for _, r := range s {
		if (r == '\n' && multiline) || r == '\t' {
			continue
		}
		if fieldcheck.IsControlOrFormat(r) {
			return false
		}
	}
	return true
}

// Validity is how long an accepted consent lasts: a number of years,
// months, weeks and days. The zero Validity lasts until withdrawn.
type Validity struct{ Years, Months, Weeks, Days int }

var validityRE = regexp.MustCompile(`^P(?:(\d{1,4})Y)?(?:(\d{1,5})M)?(?:(\d{1,5})W)?(?:(\d{1,6})D)?$`)

// maxValidity bounds a validity so that validUntil stays a sensible date.
const maxValidity = 100 * 366 * 24 * time.Hour

// ParseValidity reads an ISO 8601 duration of years, months, weeks and days
// (P90D, P1Y6M); empty s is the zero Validity.
func ParseValidity(s string) (Validity, error) {
	if s == "" {
		return Validity{}, nil
	}
	m := validityRE.FindStringSubmatch(s)
	if m == nil || s == "P" {
		return Validity{}, errors.New("must be an ISO 8601 duration of years, months, weeks and days, such as P90D or P1Y")
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	v := Validity{Years: n(1), Months: n(2), Weeks: n(3), Days: n(4)}
	if v.IsZero() {
		return Validity{}, errors.New("must be longer than zero; leave it out for a consent valid until withdrawn")
	}
	if now := time.Now(); v.After(now).Sub(now) > maxValidity {
		return Validity{}, errors.New("must be at most 100 years")
	}
	return v, nil
}

// IsZero reports whether the consent lasts until withdrawn.
func (v Validity) IsZero() bool { return v == Validity{} }

// String is the ISO 8601 duration; empty for the zero Validity.
func (v Validity) String() string {
	if v.IsZero() {
		return ""
	}
	var b strings.Builder
	b.WriteByte('P')
	for _, p := range []struct {
		n    int
		unit byte
	}{{v.Years, 'Y'}, {v.Months, 'M'}, {v.Weeks, 'W'}, {v.Days, 'D'}} {
		if p.n > 0 {
			b.WriteString(strconv.Itoa(p.n))
			b.WriteByte(p.unit)
		}
	}
	return b.String()
}

// After returns when a consent given at t ends.
func (v Validity) After(t time.Time) time.Time {
	return t.AddDate(v.Years, v.Months, 7*v.Weeks+v.Days)
}

// ValidUntil returns when a consent given at t under v ends, or nil when it
// lasts until withdrawn.
func (v Version) ValidUntil(t time.Time) *time.Time {
	if v.Validity.IsZero() {
		return nil
	}
	until := v.Validity.After(t)
	return &until
}

// canonicalText is the text of a version, as it is hashed: everything the
// consent page shows of it, in both languages.
type canonicalText struct {
	AssuranceLevel assurance.Level `json:"assuranceLevel"`
	DataCategories []Text          `json:"dataCategories"`
	Definition     string          `json:"definition"`
	// ParameterValues, Parameters and Resources are left out when empty,
	// so that a text without them hashes as before they existed.
	ParameterValues map[string]string    `json:"parameterValues,omitempty"`
	Parameters      []canonicalParameter `json:"parameters,omitempty"`
	Purpose         Text                 `json:"purpose"`
	Recipient       string               `json:"recipient"`
	Resources       []string             `json:"resources,omitempty"`
	Title           Text                 `json:"title"`
	Validity        *string              `json:"validity"`
	Version         int                  `json:"version"`
	// WithdrawalConsequences is left out when the version has none, so the
	// text of a version without it hashes as before it existed.
	WithdrawalConsequences *Text `json:"withdrawalConsequences,omitempty"`
}

// canonicalParameter is a declared parameter as the canonical text holds
// it: its members in code point order, as RFC 8785 orders them.
type canonicalParameter struct {
	Label Text   `json:"label"`
	Name  string `json:"name"`
}

// CanonicalText is the version's text in its canonical form: a JSON object
// serialized as RFC 8785 (JSON Canonicalization Scheme) prescribes, so that
// anyone can rebuild it from the API's representation and check
// TextSHA256. Its members, in order: assuranceLevel, dataCategories (each
// {en, nb}), definition (the id), purpose {en, nb}, recipient, title
// {en, nb}, validity (ISO 8601 or null), version and, only when the version
// has them, withdrawalConsequences {en, nb}; parameters (each {label {en,
// nb}, name}) after definition and resources after recipient, only when
// the version has them.
func (v Version) CanonicalText() []byte { return v.CanonicalTextWith(nil) }

// CanonicalTextWith is the text a flow's person is shown: CanonicalText
// with the flow's parameter values as the member parameterValues (an
// object by name, after definition), when it has any.
func (v Version) CanonicalTextWith(values map[string]string) []byte {
	c := canonicalText{AssuranceLevel: v.AssuranceLevel, DataCategories: v.DataCategories, Definition: v.DefinitionID,
		Purpose: v.Purpose, Recipient: v.Recipient, Title: v.Title, Version: v.Version,
		ParameterValues: values, Resources: v.Resources}
	for _, p := range v.Parameters {
		c.Parameters = append(c.Parameters, canonicalParameter{Label: p.Label, Name: p.Name})
	}
	if c.DataCategories == nil {
		c.DataCategories = []Text{}
	}
	if !v.Validity.IsZero() {
		s := v.Validity.String()
		c.Validity = &s
	}
	if !v.WithdrawalConsequences.IsZero() {
		c.WithdrawalConsequences = &v.WithdrawalConsequences
	}
	// Members are declared in code point order and texts hold no control
	// characters but line feeds and tabs, so encoding/json without HTML
	// escaping writes exactly RFC 8785's form.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		panic(err) // strings and numbers only: cannot fail
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// hashText returns the SHA-256 of the version's canonical text.
func (v Version) hashText() []byte { return v.TextSHA256With(nil) }

// TextSHA256With returns the SHA-256 of CanonicalTextWith(values): the
// version's TextSHA256 when values is empty.
func (v Version) TextSHA256With(values map[string]string) []byte {
	sum := sha256.Sum256(v.CanonicalTextWith(values))
	return sum[:]
}

// TextBlock is a paragraph or a list of a plain text.
type TextBlock struct {
	List  bool
	Lines []string // a paragraph's lines, or a list's items
}

// Blocks splits a plain text into paragraphs, separated by blank lines, and
// lists, whose items are lines starting with "- ", "* " or "• ".
func Blocks(text string) []TextBlock {
	var out []TextBlock
	for para := range strings.SplitSeq(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		var cur *TextBlock
		for line := range strings.SplitSeq(para, "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			item, isItem := listItem(line)
			if cur == nil || cur.List != isItem {
				out = append(out, TextBlock{List: isItem})
				cur = &out[len(out)-1]
			}
			if isItem {
				line = item
			}
			cur.Lines = append(cur.Lines, line)
		}
	}
	return out
}

func listItem(line string) (string, bool) {
	for _, bullet := range []string{"- ", "* ", "• "} {
		if rest, ok := strings.CutPrefix(line, bullet); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}
