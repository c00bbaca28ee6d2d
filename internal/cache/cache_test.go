package cache

import (
	"testing"
	"time"
)

// TestTheCacheKeepsTheRecentWithinItsSize: never more than its size, and
// always the last half of it put or read.
func TestTheCacheKeepsTheRecentWithinItsSize(t *testing.T) {
	t.Parallel()
	m := New[int, int](10)
	for i := range 100 {
		m.Put(i, i)
		if n := m.Len(); n > 10 {
			t.Fatalf("%d values held after %d puts, want at most 10", n, i+1)
		}
	}
	for i := 95; i < 100; i++ {
		if v, ok := m.Get(i); !ok || v != i {
			t.Errorf("Get(%d) = %d, %v: one of the last five put is gone", i, v, ok)
		}
	}
	if _, ok := m.Get(0); ok {
		t.Error("the first value put is still held")
	}
	// A value read moves to the current half, and outlives the turnover
	// that drops the values not read.
	m = New[int, int](4)
	m.Put(1, 1)
	m.Put(2, 2)
	m.Put(3, 3) // turnover: 1 and 2 are the previous half
	m.Get(1)    // 1 joins 3
	m.Put(4, 4) // turnover: 1 and 3 are the previous half, 2 goes
	if _, ok := m.Get(1); !ok {
		t.Error("a value read was dropped before those never read")
	}
	if _, ok := m.Get(2); ok {
		t.Error("a value never read outlived two turnovers")
	}
}

// TestExpiringValuesMissFromTheirExpiry: and go first when the cache is full.
func TestExpiringValuesMissFromTheirExpiry(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	m := New[string, int](4, Expiring(func() time.Time { return now }))
	m.PutUntil("a", 1, now.Add(time.Minute))
	m.PutUntil("b", 2, now.Add(time.Hour))
	m.Put("c", 3)
	if _, ok := m.Get("a"); !ok {
		t.Fatal("a value missed before its expiry")
	}
	now = now.Add(time.Minute)
	if _, ok := m.Get("a"); ok {
		t.Error("a value was read at its expiry")
	}
	if _, ok := m.Get("c"); !ok {
		t.Error("a value put without an expiry expired")
	}
	m.Prune()
	if n := m.Len(); n != 2 {
		t.Errorf("%d values after pruning, want 2", n)
	}
}

// TestAPutRacingAForgettingIsRefused: PutIf keeps nothing once something
// was forgotten since the generation it was given.
func TestAPutRacingAForgettingIsRefused(t *testing.T) {
	t.Parallel()
	m := New[string, string](8)
	gen := m.Gen()
	m.Put("other", "x") // a put is no forgetting
	if !m.PutIf(gen, "k", "v") {
		t.Fatal("PutIf refused with nothing forgotten")
	}
	gen = m.Gen()
	m.DeleteFunc(func(k, _ string) bool { return k == "other" })
	if m.PutIf(gen, "k", "stale") {
		t.Error("PutIf kept a value loaded before a forgetting")
	}
	if v, _ := m.Get("k"); v != "v" {
		t.Errorf("Get(k) = %q, want the value kept before", v)
	}
	if _, ok := m.Get("other"); ok {
		t.Error("DeleteFunc left a value it was told to drop")
	}
	m.Clear()
	if m.Len() != 0 {
		t.Error("Clear left values")
	}
}
