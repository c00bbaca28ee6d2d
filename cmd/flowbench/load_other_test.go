//go:build !linux

package main

import (
	"errors"
	"testing"
)

// TestLoadSaysItNeedsLinux: off Linux, flowbench stops before it builds
// anything, with an error that says why.
func TestLoadSaysItNeedsLinux(t *testing.T) {
	t.Parallel()
	if _, err := newLoad("http://127.0.0.1:8080", 4); !errors.Is(err, errNeedsLinux) {
		t.Fatalf("newLoad off Linux: %v, want %v", err, errNeedsLinux)
	}
}
