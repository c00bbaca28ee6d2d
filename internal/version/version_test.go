package version

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadPrefersStampsThenBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/flowd/flowd", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	tests := []struct {
		name                       string
		bi                         *debug.BuildInfo
		version, commit, buildTime string
		want                       Info
	}{
		{"stamped", vcs, "v1.3.0-2-gabcdef0", "abcdef0", "2026-02-03T04:05:06Z",
			Info{Version: "v1.3.0-2-gabcdef0", Commit: "abcdef0", CommitTime: "2026-01-02T03:04:05Z", Modified: true,
				BuildTime: "2026-02-03T04:05:06Z", GoVersion: "go1.99"}},
		{"build info only", vcs, "", "", "",
			Info{Version: "v1.2.3", Commit: "0123456789abcdef", CommitTime: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.99"}},
		{"a dirty stamp without build info", nil, "abcdef0-dirty", "", "",
			Info{Version: "abcdef0-dirty", Modified: true}},
		{"nothing known", &debug.BuildInfo{Main: debug.Module{Version: ""}}, "", "", "", Info{Version: Devel}},
		{"no build info", nil, "", "", "", Info{Version: Devel}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := read(tt.bi, tt.version, tt.commit, tt.buildTime)
			if tt.want.GoVersion == "" {
				tt.want.GoVersion = got.GoVersion // the running toolchain's
			}
			tt.want.Platform = got.Platform
			if got != tt.want {
				t.Fatalf("read:\n got %+v\nwant %+v", got, tt.want)
			}
			if got.GoVersion == "" || got.Platform == "" {
				t.Fatalf("no Go version or platform: %+v", got)
			}
		})
	}
}

// TestStampsReachTheBinary links a program with the stamps as make build and
// the Dockerfile give them: the linker ignores -X of a name that does not
// exist, so a renamed variable would go unnoticed.
func TestStampsReachTheBinary(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"../../Makefile", "../../Dockerfile"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "github.com/flowd/flowd/internal/version") {
			t.Errorf("%s does not stamp the version", file)
		}
		for _, name := range []string{"stampedVersion", "stampedCommit", "stampedBuildTime"} {
			if !strings.Contains(string(b), "."+name+"=") {
				t.Errorf("%s does not stamp %s", file, name)
			}
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "printversion")
	const pkg = "github.com/flowd/flowd/internal/version."
	build := exec.Command(goTool, "build", "-o", bin, "-ldflags",
		"-X "+pkg+"stampedVersion=v9.8.7-1-gabcdef0-dirty -X "+pkg+"stampedCommit=abcdef0123 -X "+pkg+"stampedBuildTime=2026-03-04T05:06:07Z",
		"./testdata/printversion")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Version != "v9.8.7-1-gabcdef0-dirty" || got.Commit != "abcdef0123" || got.BuildTime != "2026-03-04T05:06:07Z" || !got.Modified {
		t.Fatalf("the stamped binary says %+v", got)
	}
}

// TestImageLabelsCarryTheStamps: the image's OCI labels say what the binary
// in it says. An ARG is forgotten at each FROM, so the final stage must
// declare the stamps again, or the labels are empty.
func TestImageLabelsCarryTheStamps(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := strings.Split(string(b), "\nFROM ")
	final := stages[len(stages)-1]
	for arg, label := range map[string]string{"VERSION": "version", "COMMIT": "revision", "BUILD_TIME": "created"} {
		if !strings.Contains(final, "\nARG "+arg+"=") {
			t.Errorf("the Dockerfile's final stage does not declare ARG %s", arg)
		}
		if want := "org.opencontainers.image." + label + `="${` + arg + `}"`; !strings.Contains(final, want) {
			t.Errorf("the Dockerfile's final stage has no %s", want)
		}
	}
}
