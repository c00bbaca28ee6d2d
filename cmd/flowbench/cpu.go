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
)

// clockTick is the unit of /proc's CPU times: USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

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
		c.flowd, _ = procCPU(strconv.Itoa(b.server.cmd.Process.Pid))
	}
	c.load, _ = procCPU("self")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || string(bytes.TrimSpace(comm)) != "postgres" {
			continue
		}
		pid := filepath.Base(d)
		if len(b.postmasters) > 0 && !slices.Contains(b.postmasters, pid) && !slices.Contains(b.postmasters, procParent(pid)) {
			continue
		}
		own, children := procCPU(pid)
		c.postgres += own + children
	}
	return c
}

// postmasterOf returns the postmaster of a backend of the run's cluster
// when both are processes named postgres on this machine, else "".
func postmasterOf(backend string) string {
	parent := procParent(backend)
	for _, pid := range []string{backend, parent} {
		comm, err := os.ReadFile("/proc/" + pid + "/comm")
		if pid == "" || err != nil || string(bytes.TrimSpace(comm)) != "postgres" {
			return ""
		}
	}
	return parent
}

// procParent returns a process's parent's pid, "" when it is gone.
func procParent(pid string) string {
	f := procStat(pid)
	if len(f) < 2 {
		return ""
	}
	return string(f[1]) // field 4, ppid
}

// procStat returns the fields of /proc/PID/stat after the command name,
// from field 3 (state) on; nil when the process is gone.
func procStat(pid string) [][]byte {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return bytes.Fields(stat[i+1:])
}

// procCPU returns a process's own CPU time and that of its reaped children,
// from /proc/PID/stat; zero when the process is gone.
func procCPU(pid string) (own, children time.Duration) {
	f := procStat(pid)
	if len(f) < 15 {
		return 0, 0
	}
	tick := func(k int) time.Duration { // k is the field's number in proc(5)
		v, _ := strconv.ParseInt(string(f[k-3]), 10, 64)
		return time.Duration(v) * clockTick
	}
	return tick(14) + tick(15), tick(16) + tick(17)
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
