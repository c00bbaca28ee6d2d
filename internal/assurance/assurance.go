// Package assurance holds the eIDAS levels of assurance that national eIDs
// (ID-porten, BankID, Freja) map onto, and the map from each level to the
// acr value an eID uses for it (FLOWD_CONSENT_ACR_MAP).
package assurance

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
)

// Level is how sure an eID is of who signed in.
type Level string

const (
	Low         Level = "low"
	Substantial Level = "substantial"
	High        Level = "high"
)

// Levels lists the levels from weakest to strongest.
var Levels = []Level{Low, Substantial, High}

// Valid reports whether l is one of Levels.
func (l Level) Valid() bool { return slices.Contains(Levels, l) }

// Meets reports whether a sign-in at level l is enough where required is
// asked for. No level (an unknown acr) meets nothing.
func (l Level) Meets(required Level) bool {
	have, need := slices.Index(Levels, l), slices.Index(Levels, required)
	return have >= 0 && have >= need
}

// ACRMap maps each assurance level to the acr value the consent eID uses for
// it (FLOWD_CONSENT_ACR_MAP). An ID token's acr is read through it, and a
// sign-in that must reach a level asks for its acr in acr_values.
type ACRMap map[Level]string

// DefaultACRMap uses the eIDAS level URIs, which the test eID issues unless
// configured otherwise.
var DefaultACRMap = ACRMap{
	Low:         "http://eidas.europa.eu/LoA/low",
	Substantial: "http://eidas.europa.eu/LoA/substantial",
	High:        "http://eidas.europa.eu/LoA/high",
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
		case !Level(level).Valid():
			return nil, fmt.Errorf("unknown assurance level %q (known: low, substantial, high)", level)
		case m[Level(level)] != "":
			return nil, fmt.Errorf("assurance level %q is mapped twice", level)
		case seen[acr]:
			return nil, fmt.Errorf("acr %q is mapped to two levels", acr)
		}
		m[Level(level)], seen[acr] = acr, true
	}
	return m, nil
}

// Level returns the level an ID token's acr stands for; false when the map
// does not know it.
func (m ACRMap) Level(acr string) (Level, bool) {
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
func (m ACRMap) ACR(level Level) string {
	if !level.Valid() {
		return ""
	}
	for _, l := range Levels[slices.Index(Levels, level):] {
		if v := m[l]; v != "" {
			return v
		}
	}
	return ""
}
