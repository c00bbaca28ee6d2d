package loadgen

import "time"

// Sample is what one or more stretches of load measured.
type Sample struct {
	Latencies []time.Duration // of the requests answered within the run
	Errors    int
	FirstErr  string
	Elapsed   time.Duration
}

// Add adds what o measured to s.
func (s *Sample) Add(o Sample) {
	s.Latencies = append(s.Latencies, o.Latencies...)
	s.Errors += o.Errors
	if s.FirstErr == "" {
		s.FirstErr = o.FirstErr
	}
	s.Elapsed += o.Elapsed
}

// Fail counts a failed request and keeps the first error.
func (s *Sample) Fail(err error) {
	s.Errors++
	if s.FirstErr == "" {
		s.FirstErr = err.Error()
	}
}

// Percentile is the p-th percentile (0 to 1) of sorted latencies; 0 when
// there are none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
