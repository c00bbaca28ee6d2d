//go:build !linux

package loadgen

import (
	"errors"
	"testing"
)

// TestLoadSaysItNeedsLinux: off Linux, flowbench stops before it builds
// anything, with an error that says why.
func TestLoadSaysItNeedsLinux(t *testing.T) {
	t.Parallel()
	if _, err := New("http://127.0.0.1:8080", 4); !errors.Is(err, ErrNeedsLinux) {
		t.Fatalf("New off Linux: %v, want %v", err, ErrNeedsLinux)
	}
}
