//go:build !unix

package pgbench

import "os"

// Off Unix flowbench stops before it starts pgbench (its load generator needs Linux); these
// only let it build.
var (
	pauseSignal  = os.Interrupt
	resumeSignal = os.Interrupt
	endSignal    = os.Interrupt
)
