package api

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestFormatTimeMatchesTheLayout checks the hand-written formatter against
// time.Format on edge instants, other zones and random instants.
func TestFormatTimeMatchesTheLayout(t *testing.T) {
	t.Parallel()
	oslo, err := time.LoadLocation("Europe/Oslo")
	if err != nil {
		oslo = time.FixedZone("CET", 3600)
	}
	instants := []time.Time{
		{},
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 22, 5, 8, 38, 999_999_999, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 1_000_000, oslo),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		instants = append(instants, time.Unix(r.Int64N(400_000_000_000)-100_000_000_000, r.Int64N(1e9)).In(oslo))
	}
	for _, at := range instants {
		if got, want := formatTime(at), at.UTC().Format(apiTime); got != want {
			t.Errorf("formatTime(%v) = %q, want %q", at, got, want)
		}
	}
}
