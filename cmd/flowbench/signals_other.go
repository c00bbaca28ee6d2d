//go:build !unix

package main

import "os"

// Off Unix flowbench stops before it starts pgbench (errNeedsLinux); these
// only let it build.
var (
	pauseSignal  = os.Interrupt
	resumeSignal = os.Interrupt
	endSignal    = os.Interrupt
)
