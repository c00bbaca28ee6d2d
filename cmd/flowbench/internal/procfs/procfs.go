// Package procfs reads a process's CPU time, parent and memory from
// Linux's /proc; off Linux, or once the process is gone, it reads zeroes.
package procfs

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc's CPU times: USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// Parent returns a process's parent's pid, "" when it is gone.
func Parent(pid string) string {
	f := stat(pid)
	if len(f) < 2 {
		return ""
	}
	return string(f[1]) // field 4, ppid
}

// stat returns the fields of /proc/PID/stat after the command name,
// from field 3 (state) on; nil when the process is gone.
func stat(pid string) [][]byte {
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

// CPU returns a process's own CPU time and that of its reaped children,
// from /proc/PID/stat; zero when the process is gone.
func CPU(pid string) (own, children time.Duration) {
	f := stat(pid)
	if len(f) < 15 {
		return 0, 0
	}
	tick := func(k int) time.Duration { // k is the field's number in proc(5)
		v, _ := strconv.ParseInt(string(f[k-3]), 10, 64)
		return time.Duration(v) * clockTick
	}
	return tick(14) + tick(15), tick(16) + tick(17)
}

// StatusKB reads a kB field of /proc/PID/status, in bytes.
func StatusKB(pid int, field string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
