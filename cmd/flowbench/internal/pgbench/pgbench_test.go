package pgbench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProgressIsWarmAfterTwoBusySeconds: lines of connecting (0 tps) do not
// count towards the warm-up; other output is kept for error messages.
func TestProgressIsWarmAfterTwoBusySeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		lines    []string
		wantWarm bool
	}{
		{"connecting, then two busy seconds", []string{
			"progress: 1.7 s, 0.0 tps, lat 0.000 ms stddev 0.000, 0 failed",
			"progress: 2.0 s, 2034.7 tps, lat 30.094 ms stddev 96.376, 0 failed",
			"progress: 3.0 s, 3938.8 tps, lat 7.465 ms stddev 6.473, 0 failed",
		}, true},
		{"one busy second only", []string{
			"progress: 1.7 s, 0.0 tps, lat 0.000 ms stddev 0.000, 0 failed",
			"progress: 2.0 s, 2034.7 tps, lat 30.094 ms stddev 96.376, 0 failed",
			"pgbench: error: connection lost",
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := readProgress(strings.NewReader(strings.Join(tc.lines, "\n") + "\n"))
			<-p.done
			select {
			case <-p.warm:
				if !tc.wantWarm {
					t.Fatal("warm after one busy second")
				}
			default:
				if tc.wantWarm {
					t.Fatal("not warm after two busy seconds")
				}
			}
			if strings.Contains(p.text(), "progress:") {
				t.Errorf("progress lines kept as other output: %q", p.text())
			}
			if !tc.wantWarm && !strings.Contains(p.text(), "connection lost") {
				t.Errorf("other output lost: %q", p.text())
			}
		})
	}
}

// TestCountsOnlyTransactionsThatEndedInATurn: what pgbench did while
// warming up or paused between turns is not counted.
func TestCountsOnlyTransactionsThatEndedInATurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &Session{logPrefix: filepath.Join(dir, "pgbench_tx")}
	base := time.Unix(1_800_000_000, 0)
	s.turns = []turn{{from: base.Add(10 * time.Second), to: base.Add(12 * time.Second)}, {from: base.Add(20 * time.Second), to: base.Add(21 * time.Second)}}
	logLine := func(client, n int, at time.Time) string {
		return fmt.Sprintf("%d %d 1200 0 %d %d\n", client, n, at.Unix(), at.Nanosecond()/1000)
	}
	var thread0, thread1 strings.Builder
	thread0.WriteString(logLine(0, 1, base.Add(5*time.Second)))                   // warm-up
	thread0.WriteString(logLine(0, 2, base.Add(10*time.Second)))                  // the first turn's start
	thread0.WriteString(logLine(0, 3, base.Add(11500*time.Millisecond)))          // in the first turn
	thread1.WriteString(logLine(1, 1, base.Add(12*time.Second+time.Microsecond))) // just after it
	thread1.WriteString(logLine(1, 2, base.Add(15*time.Second)))                  // paused
	thread1.WriteString(logLine(1, 3, base.Add(20500*time.Millisecond)))          // in the second turn
	thread1.WriteString("not a transaction line\n")
	for name, content := range map[string]string{"pgbench_tx.123": thread0.String(), "pgbench_tx.123.1": thread1.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.countInTurns()
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("counted %d transactions in the turns, want 3", n)
	}
}
