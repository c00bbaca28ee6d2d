package app

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// flowd's live heap is small and its garbage is per request, so at Go's
// default the collector runs many times a second under load, each cycle's
// fixed costs (stopping the world, scanning stacks) paid for a heap of a few
// MiB. A collection is worth little before the heap is some tens of MiB, so
// flowd sets GOGC=200 and a floor under the heap goal; once what is live
// grows past a third of the floor, GOGC=200 alone decides. The gain and the
// memory it costs are in docs/performance.md.
const (
	gcPercent   = 200
	gcHeapFloor = 64 << 20
)

// tuneGC applies gcPercent and gcHeapFloor unless GOGC is set, in which
// case GOGC (and GOMEMLIMIT, as always) decide alone.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(gcPercent)
	gcFloorOnce.Do(func() { processGCFloor = startGCFloor(gcHeapFloor, gcPercent) })
}

var (
	gcFloorOnce    sync.Once
	processGCFloor *gcFloor // set once, by tuneGC
)

// gcFloor raises GOGC after each collection just enough that the next goal
// is at least floor bytes, and never below percent. The runtime has no
// setting for it: GOMEMLIMIT with GOGC=off collects at a fixed size however
// much is live, and a ballast would add its size to every later goal.
type gcFloor struct {
	floor   uint64
	percent int
	set     int // the GOGC last set
	samples []metrics.Sample
	stopped atomic.Bool
}

func startGCFloor(floor uint64, percent int) *gcFloor {
	g := &gcFloor{floor: floor, percent: percent, set: percent, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	// The first adjustment waits for the first collection: before it, what
	// is live reads as nothing, and the floor would let startup's garbage
	// grow unchecked.
	g.arm()
	return g
}

// stop ends the adjustments (for tests); GOGC keeps its last value.
func (g *gcFloor) stop() { g.stopped.Store(true) }

// gcSentinel is allocated only to be collected: its cleanup marks the end of
// a cycle. It holds a pointer so that it never shares a tiny block.
type gcSentinel struct{ _ *byte }

// arm has adjust run after the next collection, when the runtime finds the
// sentinel unreachable.
func (g *gcFloor) arm() {
	runtime.AddCleanup(new(gcSentinel), func(g *gcFloor) {
		if g.stopped.Load() {
			return
		}
		g.adjust()
		g.arm()
	}, g)
}

func (g *gcFloor) adjust() {
	metrics.Read(g.samples)
	live := g.samples[0].Value.Uint64()
	scanned := live + g.samples[1].Value.Uint64() + g.samples[2].Value.Uint64()
	if p := gcPercentFor(g.floor, live, scanned, g.percent); p != g.set {
		debug.SetGCPercent(p)
		g.set = p
	}
}

// gcPercentFor is the GOGC whose heap goal reaches floor, at least least. The
// runtime's goal is live + scanned×GOGC/100, scanned being the live heap
// plus the goroutine stacks and globals it scans, and never below
// 4 MiB×GOGC/100: on a nearly empty heap that minimum is what reaches the
// floor, so the percent goes no higher than makes it do so.
func gcPercentFor(floor, live, scanned uint64, least int) int {
	if scanned == 0 || live >= floor {
		return least
	}
	p := min((floor-live)*100/scanned, floor*100/runtimeHeapMinimum)
	return max(least, int(p))
}

// runtimeHeapMinimum is the runtime's heap goal at GOGC=100 however little
// is live (defaultHeapMinimum in runtime/mgcpacer.go).
const runtimeHeapMinimum = 4 << 20
