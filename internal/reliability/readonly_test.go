package reliability_test

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flowd/flowd/cmd/flowd/flowdtest"
	"github.com/flowd/flowd/internal/testkit/dbtest"
	"github.com/flowd/flowd/internal/testkit/syncbuf"
	"github.com/flowd/flowd/internal/testkit/testwait"
)

// confine runs its arguments as Kubernetes runs the chart's containers:
// every mount of a mount namespace of their own read-only (the root file
// system, the temporary directory, /dev/shm), as the image's nonroot user
// 65532, without capabilities and unable to gain privileges.
const confine = `set -e
for mp in $(awk '{print $5}' /proc/self/mountinfo); do mount -o remount,bind,ro "$mp"; done
exec setpriv --reuid 65532 --regid 65532 --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all -- "$@"`

// TestServesAsTheChartRunsIt: flowd needs nothing the Helm chart takes away.
// Confined as above, `flowd migrate` (the chart's hook Job) migrates an empty
// database, and `flowd serve` with the operations listener becomes ready
// there, serves its public port, and is what it was meant to be: the
// unprivileged user on a read-only root.
func TestServesAsTheChartRunsIt(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a read-only mount namespace and drop to an unprivileged user")
	}
	for _, tool := range []string{"unshare", "setpriv", "mount", "awk"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (util-linux)", tool)
		}
	}
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a mount namespace here: %v %s", err, out)
	}
	// The binary sits where the unprivileged user may run it; the same
	// folder is the temporary directory and home, read-only like the rest.
	dir, err := os.MkdirTemp("", "flowd-confined-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "flowd")
	raw, err := os.ReadFile(flowdBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	addr, ops := flowdtest.FreeAddr(t), flowdtest.FreeAddr(t)
	env := baseEnv(dbtest.NewEmptyURL(t), addr)
	env["FLOWD_OPS_ADDR"] = ops
	env["FLOWD_MIGRATE_ON_START"] = "false"
	env["TMPDIR"], env["HOME"] = dir, dir
	confined := func(args ...string) *exec.Cmd {
		cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", confine, "sh", bin}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		return cmd
	}

	if out, err := confined("migrate").CombinedOutput(); err != nil || !strings.Contains(string(out), "migrations are current") {
		t.Fatalf("flowd migrate, confined: %v\n%s", err, out)
	}

	p := &process{URL: "http://" + addr, Addr: addr, Env: env, Logs: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = confined("serve")
	p.cmd.Stdout, p.cmd.Stderr = p.Logs, p.Logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("flowd logs:\n%s", p.Logs.String())
		}
	})
	testwait.For(t, "the confined flowd's /readyz on the operations listener", func() (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("flowd serve, confined, exited:\n%s", p.Logs.String())
		default:
		}
		status, _ := httpGet("http://" + ops + "/readyz")
		return status == http.StatusOK, http.StatusText(status)
	})

	// The process is the unprivileged user, and its root is read-only.
	pid := p.cmd.Process.Pid
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532", "CapEff:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("the confined flowd's status lacks %q:\n%s", want, status)
		}
	}
	mounts, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(mounts)), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" && !strings.HasPrefix(f[5], "ro") {
			t.Errorf("the confined flowd's root is writable: %s", line)
		}
	}

	for _, c := range []struct {
		url, contains string
		status        int
	}{
		{p.URL + "/healthz", `"status":"ok"`, http.StatusOK},
		{p.URL + "/.well-known/openid-configuration", `"issuer":"` + p.URL + `"`, http.StatusOK},
		{p.URL + "/metrics", "", http.StatusNotFound},
		{"http://" + ops + "/metrics", "flowd_build_info", http.StatusOK},
	} {
		if status, body := httpGet(c.url); status != c.status || !strings.Contains(body, c.contains) {
			t.Errorf("GET %s: %d, want %d with %q:\n%.500s", c.url, status, c.status, c.contains, body)
		}
	}
}

// httpGet answers a GET's status and body, 0 when it got no answer.
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(body)
}
