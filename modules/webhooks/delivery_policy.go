package webhooks

import (
	"slices"

	"github.com/flowd/flowd/internal/apperr"
)

// Ordering is the order an endpoint receives a flow's events in.
type Ordering string

const (
	// Unordered deliveries go as soon as they can, each on its own.
	Unordered Ordering = "none"
	// PerFlow deliveries of a flow's events go one at a time, by sequence:
	// each waits until the one before it is delivered or has failed for
	// good. Other flows' deliveries do not wait for them.
	PerFlow Ordering = "per-flow"
)

// Orderings lists every Ordering, the default first.
var Orderings = []Ordering{Unordered, PerFlow}

// MaxRateLimit is the most deliveries a second an endpoint's throttle may
// allow; a receiver that takes more needs none.
const MaxRateLimit = 1000

func checkOrdering(f *apperr.Fields, o Ordering) {
	if !slices.Contains(Orderings, o) {
		f.Add("ordering", `must be "none" or "per-flow"`)
	}
}

func checkRateLimit(f *apperr.Fields, n int) {
	if n < 0 || n > MaxRateLimit {
		f.Add("rateLimit", "must be between 1 and %d deliveries a second, or 0 for no limit", MaxRateLimit)
	}
}
