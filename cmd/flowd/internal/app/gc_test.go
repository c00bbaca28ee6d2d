package app

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/flowd/flowd/internal/testkit/testwait"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name                 string
		floor, live, scanned uint64
		want                 int
	}{
		{"small heap: the goal reaches the floor", 64 * mib, 8 * mib, 10 * mib, 560},
		{"nothing measured yet", 64 * mib, 0, 0, 200},
		{"nearly empty heap: the runtime's minimum reaches the floor", 64 * mib, mib / 2, mib, 1600},
		{"live past the floor", 64 * mib, 70 * mib, 72 * mib, 200},
		{"the floor asks less than the minimum", 64 * mib, 30 * mib, 32 * mib, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gcPercentFor(tt.floor, tt.live, tt.scanned, 200); got != tt.want {
				t.Errorf("gcPercentFor(%d, %d, %d, 200) = %d, want %d", tt.floor, tt.live, tt.scanned, got, tt.want)
			}
		})
	}
}

// TestGCFloorRaisesTheGoalAfterEachCollection runs the floor on this test
// process's own heap, a few MiB, with a floor far above it.
func TestGCFloorRaisesTheGoalAfterEachCollection(t *testing.T) {
	stopProcessGCFloor()
	prev := debug.SetGCPercent(200)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	const floor = 512 << 20

	runtime.GC()
	if goal := heapGoal(); goal > floor/2 {
		t.Fatalf("heap goal %d MiB before the floor: the test needs a heap far below %d MiB", goal>>20, floor>>20)
	}

	g := startGCFloor(floor, 200)
	runtime.GC()
	// The adjustment runs after the collection, in the runtime's cleanup goroutine.
	testwait.For(t, fmt.Sprintf("a heap goal of about %d MiB after a collection", floor>>20), func() (bool, string) {
		return heapGoal() >= floor*95/100, fmt.Sprintf("heap goal %d MiB", heapGoal()>>20)
	})
	if goal := heapGoal(); goal > floor {
		t.Errorf("heap goal %d MiB, over the floor of %d MiB", goal>>20, floor>>20)
	}

	// Stopped, it leaves GOGC alone: the goal falls back with GOGC=200. The
	// cleanup armed before stop may still run once, and must not adjust.
	g.stop()
	testwait.For(t, "the heap goal of GOGC=200 after stop", func() (bool, string) {
		debug.SetGCPercent(200)
		runtime.GC()
		return heapGoal() <= floor/2, fmt.Sprintf("heap goal %d MiB", heapGoal()>>20)
	})
}

func TestTuneGCLeavesASetGOGCAlone(t *testing.T) {
	stopProcessGCFloor()
	prev := debug.SetGCPercent(123)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	tuneGC(func(k string) string { return map[string]string{"GOGC": "123"}[k] })
	if got := debug.SetGCPercent(123); got != 123 {
		t.Errorf("GOGC = %d after tuneGC with GOGC set, want 123", got)
	}
}

// stopProcessGCFloor stops the floor that serve tests in this process may
// have started, so that a test has the collector to itself.
func stopProcessGCFloor() {
	gcFloorOnce.Do(func() {})
	if processGCFloor != nil {
		processGCFloor.stop()
	}
}

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
