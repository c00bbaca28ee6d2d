//go:build unix

package pgbench

import "syscall"

// The signals that pause, resume and end a pgbench session: SIGALRM is
// pgbench's own signal for the end of -T.
var (
	pauseSignal  = syscall.SIGSTOP
	resumeSignal = syscall.SIGCONT
	endSignal    = syscall.SIGALRM
)
