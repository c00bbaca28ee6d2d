package archtest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestBuildsOffLinux: flowd is developed on macOS and Windows too, so code
// that needs Linux, such as flowbench's epoll load generator, sits behind a
// build constraint with a fallback for other systems. This vets the package
// that has such code, tests included; `make lint` builds and vets every
// package for both systems, which on a cold build cache takes minutes.
func TestBuildsOffLinux(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	for _, tt := range []struct {
		goos string
		args []string
	}{
		{"darwin", []string{"vet", "./cmd/flowbench"}},
		{"windows", []string{"vet", "./cmd/flowbench"}},
	} {
		t.Run(tt.goos, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, goTool, tt.args...)
			cmd.Dir = root(t)
			cmd.Env = append(os.Environ(), "GOOS="+tt.goos, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("GOOS=%s go %v: %v\n%s", tt.goos, tt.args, err, out)
			}
		})
	}
}
