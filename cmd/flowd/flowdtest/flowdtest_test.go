package flowdtest

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/flowd/flowd/internal/testkit/dbtest"
)

// TestATakenPortIsReportedAsTaken: flowd started on an address another
// process holds is not taken for ready, even though that address answers,
// and reports the address as in use, which Start answers with another port.
func TestATakenPortIsReportedAsTaken(t *testing.T) {
	t.Parallel()
	other := Start(t) // answers /readyz at its address
	taken := other.URL[len("http://"):]
	in := start(options{databaseURL: dbtest.NewURL(t), env: map[string]string{}}, taken)
	defer in.cancel()
	err := in.waitReady(t)
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("flowd on %s, which another flowd holds: waitReady returned %v, want address in use", taken, err)
	}
	if _, err := net.Dial("tcp", taken); err != nil {
		t.Fatalf("the other flowd stopped answering: %v", err)
	}
}
