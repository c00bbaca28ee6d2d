package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowd/flowd/cmd/flowbench/internal/procfs"
)

// cpuTimes is the CPU time (user + system) spent so far by flowd, by
// PostgreSQL and by flowbench itself. They say where a request's cost goes
// on the shared cores, which the ratio alone does not.
type cpuTimes struct {
	flowd, postgres, load time.Duration
}

func (c cpuTimes) add(o cpuTimes) cpuTimes {
	return cpuTimes{flowd: c.flowd + o.flowd, postgres: c.postgres + o.postgres, load: c.load + o.load}
}

func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	return cpuTimes{flowd: c.flowd - o.flowd, postgres: c.postgres - o.postgres, load: c.load - o.load}
}

// cpuNow reads the three from /proc. PostgreSQL is the run's cluster: its
// postmasters (one, or a Citus cluster's coordinator and workers) and every
// process they started, plus the CPU of the backends that have exited, which
// a postmaster counts as its children's (pgbench's backends are gone by the
// time its run is measured). When no postmaster is known, every process
// named postgres counts, another cluster's too.
func (b *bench) cpuNow() cpuTimes {
	var c cpuTimes
	if b.server != nil {
		c.flowd, _ = procfs.CPU(strconv.Itoa(b.server.Pid()))
	}
	c.load, _ = procfs.CPU("self")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || string(bytes.TrimSpace(comm)) != "postgres" {
			continue
		}
		pid := filepath.Base(d)
		if len(b.postmasters) > 0 && !slices.Contains(b.postmasters, pid) && !slices.Contains(b.postmasters, procfs.Parent(pid)) {
			continue
		}
		own, children := procfs.CPU(pid)
		c.postgres += own + children
	}
	return c
}

// postmasterOf returns the postmaster of a backend of the run's cluster
// when both are processes named postgres on this machine, else "".
func postmasterOf(backend string) string {
	parent := procfs.Parent(backend)
	for _, pid := range []string{backend, parent} {
		comm, err := os.ReadFile("/proc/" + pid + "/comm")
		if pid == "" || err != nil || string(bytes.TrimSpace(comm)) != "postgres" {
			return ""
		}
	}
	return parent
}

// perCall is d per n calls, in microseconds.
func perCall(d time.Duration, n float64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(d.Microseconds()) / n
}

// mallocs reads flowd's heap allocations so far from its /metrics; 0 when
// it cannot.
func (b *bench) mallocs(ctx context.Context) float64 {
	return b.metric(ctx, "go_memstats_mallocs_total")
}

// metric reads one of flowd's counters (without labels) from its /metrics;
// 0 when it cannot.
func (b *bench) metric(ctx context.Context, name string) float64 {
	req, err := http.NewRequestWithContext(ctx, "GET", b.base+"/metrics", nil)
	if err != nil {
		return 0
	}
	res, err := (&http.Client{Transport: b.transport, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}
