package consent

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
)

// AssuranceLevel is how sure an eID is of who signed in: the eIDAS levels
// of assurance, which national eIDs (ID-porten, BankID, Freja) map onto.
type AssuranceLevel string

const (
	AssuranceLow         AssuranceLevel = "low"
	AssuranceSubstantial AssuranceLevel = "substantial"
	AssuranceHigh        AssuranceLevel = "high"
)

// AssuranceLevels lists the levels from weakest to strongest.
var AssuranceLevels = []AssuranceLevel{AssuranceLow, AssuranceSubstantial, AssuranceHigh}

// Valid reports whether l is one of AssuranceLevels.
func (l AssuranceLevel) Valid() bool { return slices.Contains(AssuranceLevels, l) }

// Meets reports whether a sign-in at level l is enough where required is
// asked for. No level (an unknown acr) meets nothing.
func (l AssuranceLevel) Meets(required AssuranceLevel) bool {
	have, need := slices.Index(AssuranceLevels, l), slices.Index(AssuranceLevels, required)
	return have >= 0 && have >= need
}

// ACRMap maps each assurance level to the acr value the consent eID uses for
// it (FLOWD_CONSENT_ACR_MAP). An ID token's acr is read through it, and a
// sign-in that must reach a level asks for its acr in acr_values.
type ACRMap map[AssuranceLevel]string

// DefaultACRMap uses the eIDAS level URIs, which the test eID issues unless
// configured otherwise.
var DefaultACRMap = ACRMap{
	AssuranceLow:         "http://eidas.europa.eu/LoA/low",
	AssuranceSubstantial: "http://eidas.europa.eu/LoA/substantial",
	AssuranceHigh:        "http://eidas.europa.eu/LoA/high",
}

// ParseACRMap reads "level=acr" pairs separated by commas, such as
// "substantial=idporten-loa-substantial,high=idporten-loa-high". A level left
// out cannot be reached: a definition that requires it refuses every
// sign-in. Empty s is DefaultACRMap.
func ParseACRMap(s string) (ACRMap, error) {
	if strings.TrimSpace(s) == "" {
		return maps.Clone(DefaultACRMap), nil // the caller's own: changing it leaves the default as it is
	}
	m := ACRMap{}
	seen := map[string]bool{}
	for pair := range strings.SplitSeq(s, ",") {
		level, acr, ok := strings.Cut(strings.TrimSpace(pair), "=")
		level, acr = strings.TrimSpace(level), strings.TrimSpace(acr)
		switch {
		case !ok || acr == "":
			return nil, fmt.Errorf("%q is not level=acr", pair)
		case strings.ContainsFunc(acr, unicode.IsSpace):
			// acr_values separates values by spaces, so such an acr could never be asked for.
			return nil, fmt.Errorf("acr %q contains a space", acr)
		case !AssuranceLevel(level).Valid():
			return nil, fmt.Errorf("unknown assurance level %q (known: low, substantial, high)", level)
		case m[AssuranceLevel(level)] != "":
			return nil, fmt.Errorf("assurance level %q is mapped twice", level)
		case seen[acr]:
			return nil, fmt.Errorf("acr %q is mapped to two levels", acr)
		}
		m[AssuranceLevel(level)], seen[acr] = acr, true
	}
	return m, nil
}

// Level returns the level an ID token's acr stands for; false when the map
// does not know it.
func (m ACRMap) Level(acr string) (AssuranceLevel, bool) {
	for l, v := range m {
		if v == acr && acr != "" {
			return l, true
		}
	}
	return "", false
}

// ACR returns the acr value that asks the eID for at least level: the
// level's own value, or else that of the weakest stronger level mapped;
// empty for no level or one no value reaches.
func (m ACRMap) ACR(level AssuranceLevel) string {
	if !level.Valid() {
		return ""
	}
	for _, l := range AssuranceLevels[slices.Index(AssuranceLevels, level):] {
		if v := m[l]; v != "" {
			return v
		}
	}
	return ""
}

// AssuranceError is the ErrAssuranceTooLow of one sign-in: Required is the
// definition's level, and ACR what the eID must be asked for to reach it.
type AssuranceError struct {
	Required AssuranceLevel
	ACR      string
}

func (e *AssuranceError) Error() string {
	return ErrAssuranceTooLow.Error() + ": " + string(e.Required) + " is required"
}

// Is makes errors.Is(err, ErrAssuranceTooLow) hold for every AssuranceError.
func (e *AssuranceError) Is(target error) bool { return target == ErrAssuranceTooLow }
