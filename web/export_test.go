package web

import (
	"time"

	"github.com/flowd/flowd/internal/apperr"
)

// What the tests of web_test reach of the package's own.

// ProblemKind is a code's problem status and title.
type ProblemKind struct {
	Status int
	Title  string
}

// ProblemKinds are the problems of every code the error handler knows.
func ProblemKinds() map[apperr.Code]ProblemKind {
	out := make(map[apperr.Code]ProblemKind, len(problemKinds))
	for code, k := range problemKinds {
		out[code] = ProblemKind{Status: k.status, Title: k.title}
	}
	return out
}

var IPExtractor = ipExtractor

// SetDrainDelay replaces the timer of s's shutdown delay, so that a test
// ends the delay when it has seen the drain.
func SetDrainDelay(s *Server, after func(time.Duration) <-chan time.Time) {
	s.ready.drainDelay = after
}
