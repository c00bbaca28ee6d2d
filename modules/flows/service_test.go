package flows

import "testing"

func TestReadRoundTrips(t *testing.T) {
	tests := []struct {
		name                     string
		setting, cpus, poolConns int
		want                     int
	}{
		{"default is one per CPU", 0, 4, 8, 4},
		{"default is at least 2", 0, 1, 8, 2},
		{"setting wins over CPUs", 3, 2, 8, 3},
		{"never more than the pool", 0, 16, 8, 8},
		{"setting capped by the pool", 20, 2, 8, 8},
		{"a pool of one", 0, 2, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readRoundTrips(tt.setting, tt.cpus, tt.poolConns); got != tt.want {
				t.Fatalf("readRoundTrips(%d, %d, %d) = %d, want %d", tt.setting, tt.cpus, tt.poolConns, got, tt.want)
			}
		})
	}
}
